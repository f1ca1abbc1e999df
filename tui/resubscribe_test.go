package tui

import (
	"bytes"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestConsoleResubscribesWhenItFellBehind: the daemon ends the stream with
// Aborted because the console fell behind; the console watches again at
// once, with no banner and no backoff (a reconnection would wait an hour
// here), and replaces its state with the new snapshot.
func TestConsoleResubscribesWhenItFellBehind(t *testing.T) {
	t.Parallel()
	fresh := act("order-2000", "1", "ShipParcel", stScheduled, 1, 5)
	fresh.NextAttemptTime = at(time.Minute)
	lagged := status.Error(codes.Aborted, "the watch fell more than 4096 events behind; resubscribe for a fresh snapshot")
	fake := &fakeBackend{
		scripts: []script{
			{events: snapshot(fixtureActivities(), fixtureWorkflows()), end: lagged},
			{events: snapshot([]*durablev1.PendingActivity{fresh}, nil)},
		},
		history: fixtureHistory(),
	}
	p := Params{ReconnectDelayFunc: func(int) time.Duration { return time.Hour }}
	tm := teatest.NewTestModel(t, setup(t, fake, p), teatest.WithInitialTermSize(100, 30))
	waitFor(t, tm, "ShipParcel")
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
	if len(final.st.acts) != 1 || !final.conn.live || final.conn.failures != 0 || final.conn.lastErr != "" {
		t.Fatalf("after resubscribing: %d activities, live=%v failures=%d lastErr=%q",
			len(final.st.acts), final.conn.live, final.conn.failures, final.conn.lastErr)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.watchCalls != 2 {
		t.Fatalf("%d Watch calls, want 2", fake.watchCalls)
	}
}

// TestFallingBehindShowsNoBanner: between the Aborted and the new snapshot
// the console stays live, showing what it had.
func TestFallingBehindShowsNoBanner(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	m = feed(m, snapshot(fixtureActivities(), fixtureWorkflows())...)
	next, cmd := m.Update(streamErrMsg{gen: m.conn.gen, err: status.Error(codes.Aborted, "resubscribe")})
	m = next.(Model)
	if cmd == nil || !m.conn.live || m.conn.failures != 0 || m.conn.retrying {
		t.Fatalf("after Aborted: cmd=%v live=%v failures=%d retrying=%v, want a resubscription and no failure", cmd != nil, m.conn.live, m.conn.failures, m.conn.retrying)
	}
	if v := m.View(); bytes.Contains([]byte(v), []byte("disconnected")) {
		t.Fatalf("the view shows a banner after falling behind:\n%s", v)
	}
	if msg, ok := cmd().(streamOpenedMsg); !ok || msg.gen != m.conn.gen {
		t.Fatalf("the command gave %T, want the new stream of generation %d", msg, m.conn.gen)
	}
}
