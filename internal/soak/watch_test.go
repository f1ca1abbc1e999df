package soak

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// mirror is what a console keeps: the daemon's state as Watch tells it,
// resubscribed whenever the stream ends (the daemon was killed, or the
// stream fell behind). Once the faults end and everything settled, the
// mirror must show it too: no workflow running, nothing pending, no
// operation releasing. A change Watch dropped would leave it stale.
type mirror struct {
	c *client.Client

	mu         sync.Mutex
	ready      bool // the current subscription's snapshot is complete
	workflows  map[string]durablev1.WorkflowStatus
	activities map[string]durablev1.ActivityState // by idempotency key
	operations map[string]durablev1.OperationState
	changed    chan struct{}

	subscriptions int // Watch calls made
	snapshots     int // of which delivered a whole snapshot
	events        int
	ends          map[string]int // how streams ended, by code
	unexpected    []problem
}

func newMirror(c *client.Client) *mirror {
	return &mirror{c: c, ends: map[string]int{}, changed: make(chan struct{})}
}

// run subscribes until ctx ends.
func (m *mirror) run(ctx context.Context) {
	for ctx.Err() == nil {
		m.subscribe(ctx)
		pause(ctx, 20*time.Millisecond)
	}
}

func (m *mirror) subscribe(ctx context.Context) {
	m.mu.Lock()
	m.subscriptions++
	m.ready = false
	m.mu.Unlock()
	events, errc := m.c.Watch(ctx)
	snap := newState()
	for ev := range events {
		m.mu.Lock()
		m.events++
		switch ev.GetKind() {
		case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT:
			snap.apply(ev)
		case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE:
			m.workflows, m.activities, m.operations = snap.workflows, snap.activities, snap.operations
			m.ready = true
			m.snapshots++
			// client.Watch resubscribes by itself when the stream fell
			// behind: another snapshot may follow on the same channel,
			// and it replaces this state rather than adding to it.
			snap = newState()
		default:
			if m.ready {
				(&state{m.workflows, m.activities, m.operations}).apply(ev)
			}
		}
		close(m.changed)
		m.changed = make(chan struct{})
		m.mu.Unlock()
	}
	err := <-errc
	m.mu.Lock()
	defer m.mu.Unlock()
	switch code := status.Code(err); {
	case err == nil && ctx.Err() != nil:
	case code == codes.Unavailable, code == codes.Aborted, code == codes.ResourceExhausted:
		// The daemon went away, or the stream fell behind and says to
		// resubscribe.
		m.ends[code.String()]++
	default:
		m.ends[code.String()]++
		m.unexpected = append(m.unexpected, problem{kind: refused, check: "Watch", subject: "stream end",
			want: "Unavailable (a restart), or a code that says resubscribe (Aborted, ResourceExhausted)", got: fmt.Sprint(err)})
	}
}

type state struct {
	workflows  map[string]durablev1.WorkflowStatus
	activities map[string]durablev1.ActivityState
	operations map[string]durablev1.OperationState
}

func newState() *state {
	return &state{map[string]durablev1.WorkflowStatus{}, map[string]durablev1.ActivityState{}, map[string]durablev1.OperationState{}}
}

func (s *state) apply(ev *durablev1.WatchEvent) {
	for _, w := range ev.GetWorkflows() {
		s.workflows[w.GetWorkflowId()] = w.GetStatus()
	}
	for _, a := range ev.GetActivities() {
		s.activities[a.GetWorkflowId()+"/"+a.GetActivityId()] = a.GetState()
	}
	for _, r := range ev.GetRemoved() {
		delete(s.activities, r.GetWorkflowId()+"/"+r.GetActivityId())
	}
	for _, o := range ev.GetOperations() {
		s.operations[o.GetId()] = o.GetState()
	}
}

// busy says what the mirror still shows as going on; "" when nothing.
func (m *mirror) busyLocked() string {
	if !m.ready {
		return "its snapshot is not complete"
	}
	running, ops := 0, 0
	example := ""
	for id, st := range m.workflows {
		if st == statusRunning {
			running++
			example = id
		}
	}
	for _, st := range m.operations {
		if st == durablev1.OperationState_OPERATION_STATE_RUNNING {
			ops++
		}
	}
	if running == 0 && len(m.activities) == 0 && ops == 0 {
		return ""
	}
	return fmt.Sprintf("%d workflows running (%s, ...), %d activities pending, %d operations running", running, example, len(m.activities), ops)
}

// settled waits until the mirror shows nothing going on, for up to wait.
func (m *mirror) settled(wait time.Duration) error {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		busy, changed := m.busyLocked(), m.changed
		m.mu.Unlock()
		if busy == "" {
			return nil
		}
		select {
		case <-changed:
		case <-deadline.C:
			return fmt.Errorf("after %s the Watch view still shows %s", wait, busy)
		}
	}
}
