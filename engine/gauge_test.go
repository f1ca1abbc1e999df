package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// gauges renders the activity counts as "queue/state=n", sorted.
func gauges(e *engine.Engine) []string {
	var out []string
	for _, g := range e.Gauges().Activities {
		out = append(out, fmt.Sprintf("%s/%s=%d", g.TaskQueue, g.State, g.Count))
	}
	return out
}

func wantGauges(t *testing.T, step string, e *engine.Engine, want ...string) {
	t.Helper()
	if got := gauges(e); !slices.Equal(got, want) {
		t.Errorf("%s: gauges = %v, want %v", step, got, want)
	}
}

const (
	gScheduled = "ACTIVITY_STATE_SCHEDULED"
	gStarted   = "ACTIVITY_STATE_STARTED"
	gRetrying  = "ACTIVITY_STATE_RETRYING"
	gDead      = "ACTIVITY_STATE_DEAD_LETTERED"
)

// TestGaugesFollowEveryTransition: the per-queue counts move with scheduling,
// leases, retries, dead letters, redrives, completion and workflow close, and
// a new engine on the same store rebuilds them.
func TestGaugesFollowEveryTransition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := engine.NewFakeClock(t0)
	st, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := engine.New(st, engine.Options{Clock: clock, Jitter: func(d time.Duration) time.Duration { return d }})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, e: e, clock: clock}
	ctx := context.Background()
	h.startWithActivity("wf", &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 2, InitialMs: 1000}})
	wantGauges(t, "scheduled", e, "q/"+gScheduled+"=1")
	task := h.pollActivity()
	wantGauges(t, "leased", e, "q/"+gStarted+"=1")
	h.fail(task, &durablev1.Failure{Type: "X"})
	wantGauges(t, "retrying", e, "q/"+gRetrying+"=1")
	if p := e.Gauges().Polls; len(p) != 0 {
		t.Errorf("parked polls = %v, want none", p)
	}
	clock.Advance(time.Second)
	h.fail(h.pollActivity(), &durablev1.Failure{Type: "X"})
	wantGauges(t, "dead-lettered", e, "q/"+gDead+"=1")

	e.Close()
	if e, err = engine.New(st, engine.Options{Clock: clock}); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	h.e = e
	wantGauges(t, "rebuilt after a restart", e, "q/"+gDead+"=1")

	if _, err := e.RedriveDeadLetter(ctx, alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf", ActivityId: "1"}); err != nil {
		t.Fatal(err)
	}
	wantGauges(t, "redriven", e, "q/"+gScheduled+"=1")
	task = h.pollActivity()
	if _, err := e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()}); err != nil {
		t.Fatal(err)
	}
	wantGauges(t, "completed", e)

	// A workflow that closes takes its pending activities out of the counts.
	wt := h.pollWorkflow()
	_, err = e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{
		{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "2", ActivityType: "Charge", ActivityOptions: &durablev1.ActivityOptions{TaskQueue: "other"}},
		{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW},
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantGauges(t, "workflow closed", e)

	// A parked poll is counted while it waits.
	pollCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go e.PollActivityTask(pollCtx, &durablev1.PollActivityTaskRequest{TaskQueue: "idle"})
	deadline := time.Now().Add(10 * time.Second)
	for len(e.Gauges().Polls) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a parked poll was never counted")
		}
		time.Sleep(time.Millisecond)
	}
	if p := e.Gauges().Polls[0]; p.TaskQueue != "idle" || p.Kind != engine.ActivityTask || p.Parked != 1 {
		t.Errorf("parked polls = %+v", p)
	}
}

// recordingObserver keeps what the engine reported.
type recordingObserver struct {
	mu     sync.Mutex
	events []string
}

func (o *recordingObserver) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, s)
}

func (o *recordingObserver) AttemptStarted(typ string, attempt int32, waited time.Duration) {
	o.add(fmt.Sprintf("started %s #%d after %v", typ, attempt, waited))
}
func (o *recordingObserver) AttemptEnded(typ string, r engine.AttemptResult, took time.Duration) {
	o.add(fmt.Sprintf("ended %s %s after %v", typ, r, took))
}
func (o *recordingObserver) TimedOut(typ, kind string)         { o.add("timed out " + typ + " " + kind) }
func (o *recordingObserver) DeadLettered(typ string)           { o.add("dead-lettered " + typ) }
func (o *recordingObserver) Redriven(typ string)               { o.add("redriven " + typ) }
func (o *recordingObserver) BatchCommitted(int, time.Duration) {}
func (o *recordingObserver) Synced(time.Duration)              {}

func (o *recordingObserver) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.events
	o.events = nil
	return out
}

// TestObserverHearsAttempts: every attempt's start and end reaches the
// Observer with its wait, duration and result, and so do timeouts, dead
// letters and redrives.
func TestObserverHearsAttempts(t *testing.T) {
	t.Parallel()
	obs := &recordingObserver{}
	h := setup(t, engine.Options{Observer: obs})
	h.startWithActivity("wf", &durablev1.ActivityOptions{
		StartToCloseTimeout: dur(time.Minute),
		RetryPolicy:         &durablev1.RetryPolicy{MaxAttempts: 3, InitialMs: 1000, MaxIntervalMs: 1000},
	})
	h.clock.Advance(2 * time.Second)
	task := h.pollActivity()
	h.clock.Advance(3 * time.Second)
	h.fail(task, &durablev1.Failure{Type: "X"})
	h.clock.Advance(1500 * time.Millisecond)
	h.pollActivity() // attempt 2, left to time out
	h.clock.Advance(time.Minute)
	h.pollActivity() // fires the lease timer; attempt 3 is due a second later
	h.clock.Advance(time.Second)
	h.fail(h.pollActivity(), &durablev1.Failure{Type: "X"})
	if _, err := h.e.RedriveDeadLetter(context.Background(), alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf", ActivityId: "1"}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"started Charge #1 after 2s",
		"ended Charge retried after 3s",
		"started Charge #2 after 500ms",
		"timed out Charge StartToCloseTimeout",
		"ended Charge timed_out after 1m0s",
		"started Charge #3 after 0s",
		"ended Charge dead_lettered after 0s",
		"dead-lettered Charge",
		"redriven Charge",
	}
	if got := obs.take(); !slices.Equal(got, want) {
		t.Errorf("observer heard\n%s\nwant\n%s", fmt.Sprint(got), fmt.Sprint(want))
	}
}
