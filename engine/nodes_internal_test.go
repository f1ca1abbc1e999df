package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestNodeAliveWhileHeardFromWithinTheWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		lastSeen time.Time
		want     bool
	}{
		{"JustNow", now, true},
		{"AtTheEdge", now.Add(-5 * time.Second), true},
		{"PastTheEdge", now.Add(-5*time.Second - time.Nanosecond), false},
		{"LongGone", now.Add(-time.Hour), false},
		{"ClockAhead", now.Add(2 * time.Second), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NodeAlive(tt.lastSeen, now, 5*time.Second); got != tt.want {
				t.Errorf("NodeAlive(%s before now) = %v, want %v", now.Sub(tt.lastSeen), got, tt.want)
			}
		})
	}
}

func TestNodesAsOfSortsByNameAndJudgesEachNode(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	infos := []NodeInfo{
		{Name: "c", Started: now.Add(-time.Hour), LastSeen: now.Add(-time.Second)},
		{Name: "a", Started: now.Add(-time.Hour), LastSeen: now.Add(-time.Minute)},
		{Name: "b", Started: now.Add(-2 * time.Hour), LastSeen: now},
	}
	got := nodesAsOf(infos, now, 5*time.Second)
	want := []struct {
		name  string
		alive bool
	}{{"a", false}, {"b", true}, {"c", true}}
	if len(got) != len(want) {
		t.Fatalf("nodesAsOf returned %d nodes, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].GetName() != w.name || got[i].GetAlive() != w.alive {
			t.Errorf("node %d = %s alive=%v, want %s alive=%v", i, got[i].GetName(), got[i].GetAlive(), w.name, w.alive)
		}
	}
	if !got[1].GetStartTime().AsTime().Equal(now.Add(-2*time.Hour)) || !got[1].GetLastSeenTime().AsTime().Equal(now) {
		t.Errorf("node b = %v, want its start and last seen times carried over", got[1])
	}
	if empty := nodesAsOf(nil, now, time.Second); empty == nil || len(empty) != 0 {
		t.Errorf("nodesAsOf(nil) = %#v, want an empty list", empty)
	}
}

// stuckStore is a SharedStore whose node list never comes back until
// released.
type stuckStore struct {
	SharedStore
	release chan struct{}
}

func (s stuckStore) Nodes() ([]NodeInfo, error) {
	<-s.release
	return nil, errors.New("released")
}

func TestSharedNodesGivesUpWhenTheCallEnds(t *testing.T) {
	t.Parallel()
	s := stuckStore{release: make(chan struct{})}
	defer close(s.release)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sharedNodes(ctx, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("sharedNodes on a store that does not answer = %v, want the call's context error", err)
	}
}
