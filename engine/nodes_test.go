package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestListNodesNamesTheDaemonThatAnswers(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	started := t0.Add(-time.Minute)
	self := engine.NodeSelf{Name: "node-a", Started: started, AliveWithin: 5 * time.Second}
	h.clock.Advance(time.Second)
	r, err := h.e.ListNodes(context.Background(), self)
	if err != nil {
		t.Fatal(err)
	}
	if r.GetAliveWithin().AsDuration() != 5*time.Second {
		t.Errorf("alive_within = %v, want the rule it was given", r.GetAliveWithin().AsDuration())
	}
	if shared, ok := h.store.(engine.SharedStore); ok {
		// Many nodes may share the database: this one is among them, alive.
		i := slices.IndexFunc(r.GetNodes(), func(n *durablev1.Node) bool { return n.GetName() == shared.Node() })
		if r.GetAnsweredBy() != shared.Node() || i < 0 || !r.GetNodes()[i].GetAlive() {
			t.Fatalf("ListNodes = %v, want the store's node %q, alive, answering", r, shared.Node())
		}
		return
	}
	want := &durablev1.Node{Name: "node-a", StartTime: ts(started), LastSeenTime: ts(t0.Add(time.Second)), Alive: true}
	if len(r.GetNodes()) != 1 || r.GetAnsweredBy() != "node-a" || !equalNode(r.GetNodes()[0], want) {
		t.Fatalf("ListNodes = %v, want the one daemon %v answering", r, want)
	}
	if !r.GetServerTime().AsTime().Equal(t0.Add(time.Second)) {
		t.Errorf("server_time = %v, want the engine's clock", r.GetServerTime().AsTime())
	}
}

func equalNode(a, b *durablev1.Node) bool {
	return a.GetName() == b.GetName() && a.GetAlive() == b.GetAlive() &&
		a.GetStartTime().AsTime().Equal(b.GetStartTime().AsTime()) && a.GetLastSeenTime().AsTime().Equal(b.GetLastSeenTime().AsTime())
}
