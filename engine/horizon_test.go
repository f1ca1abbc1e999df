package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// waitingOpts are the options of an activity on queue "q" whose first
// failure waits an hour, whose budget is two hours.
func waitingOpts() *durablev1.ActivityOptions {
	return &durablev1.ActivityOptions{TaskQueue: "q", StartToCloseTimeout: dur(time.Minute), ScheduleToCloseTimeout: dur(2 * time.Hour),
		RetryPolicy: &durablev1.RetryPolicy{InitialMs: 3_600_000, MaxIntervalMs: 3_600_000, MaxAttempts: 5}}
}

// wait leaves n activities of workflows prefix-0… retrying an hour from now.
func (h *harness) wait(prefix string, n int) {
	h.t.Helper()
	for i := range n {
		h.startWithActivity(fmt.Sprintf("%s-%d", prefix, i), waitingOpts())
		task := h.pollActivity()
		if task == nil {
			h.t.Fatal("no first attempt to fail")
		}
		h.fail(task, &durablev1.Failure{Type: "Unavailable"})
	}
}

func backlogOf(q *durablev1.TaskQueue) string {
	b := q.GetActivityTasks()
	return fmt.Sprintf("%d ready, %d later", b.GetReady(), b.GetLater())
}

// TestRetriesBeyondTheWindowAreCountedAndHandedOutWhenDue: retries due an
// hour away, far beyond a one-minute window, show as later, are not handed
// out early, and are handed out at their due time.
func TestRetriesBeyondTheWindowAreCountedAndHandedOutWhenDue(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{WaitWindow: time.Minute})
	h.wait("wf", 3)
	if got := backlogOf(h.queue("q")); got != "0 ready, 3 later" {
		t.Errorf("backlog while waiting = %s, want 0 ready, 3 later", got)
	}
	h.clock.Advance(time.Hour - time.Second)
	if task := h.pollActivity(); task != nil {
		t.Fatalf("a retry was handed out a second early: %v", task)
	}
	if got := backlogOf(h.queue("q")); got != "0 ready, 3 later" {
		t.Errorf("backlog a second before = %s, want 0 ready, 3 later", got)
	}
	h.clock.Advance(time.Second)
	if got := backlogOf(h.queue("q")); got != "3 ready, 0 later" {
		t.Errorf("backlog when due = %s, want 3 ready, 0 later", got)
	}
	for i := range 3 {
		if task := h.pollActivity(); task == nil || task.GetAttempt() != 2 {
			t.Fatalf("retry %d when due: %v", i, task)
		}
	}
	if got := backlogOf(h.queue("q")); got != "0 ready, 0 later" {
		t.Errorf("backlog after = %s, want 0 ready, 0 later", got)
	}
}

// TestAParkedPollGetsARetryFromBeyondTheWindow: a poll parked while the
// only retry was beyond the window receives it when it falls due.
func TestAParkedPollGetsARetryFromBeyondTheWindow(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{WaitWindow: time.Minute, PollTimeout: 3 * time.Hour})
	h.wait("wf", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan *durablev1.PollActivityTaskResponse, 1)
	go func() {
		r, _ := h.e.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w"})
		got <- r
	}()
	h.waitQueue("q", func(q *durablev1.TaskQueue) bool {
		for _, p := range q.GetPollers() {
			if p.GetIdentity() == "w" && p.GetKind() == durablev1.TaskKind_TASK_KIND_ACTIVITY && p.GetParked() {
				return true
			}
		}
		return false
	})
	// Step the clock past the window's refills to the due time; the
	// parked poll and the timer loop are woken by the fake clock.
	for range 120 {
		h.clock.Advance(30 * time.Second)
	}
	select {
	case r := <-got:
		if len(r.GetTasks()) != 1 || r.GetTasks()[0].GetAttempt() != 2 {
			t.Errorf("the parked poll got %v, want attempt 2", r.GetTasks())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked poll never got the retry")
	}
}

// TestBudgetsBeyondTheWindowRunOut: a schedule-to-close budget that ends
// beyond the window dead-letters its activity when it ends, and one that
// an override shortens ends where the override puts it.
func TestBudgetsBeyondTheWindowRunOut(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{WaitWindow: time.Minute})
	h.wait("wf", 2)
	h.clock.Advance(30 * time.Minute)
	h.setOverride("", &durablev1.OptionsPatch{ScheduleToCloseTimeout: dur(45 * time.Minute)})
	h.clock.Advance(15*time.Minute - time.Second)
	h.wantState("wf-0", retrying)
	h.clock.Advance(time.Second)
	h.wantState("wf-0", dead)
	h.wantState("wf-1", dead)

	h = setup(t, engine.Options{WaitWindow: time.Minute})
	h.startWithActivity("idle", &durablev1.ActivityOptions{TaskQueue: "nobody", StartToCloseTimeout: dur(time.Minute), ScheduleToCloseTimeout: dur(2 * time.Hour)})
	h.clock.Advance(2*time.Hour - time.Second)
	h.wantState("idle", durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED)
	h.clock.Advance(time.Second)
	if f := h.wantState("idle", dead).GetLastFailure(); f.GetType() != engine.TimeoutScheduleToClose {
		t.Errorf("failure = %v, want a ScheduleToCloseTimeout", f)
	}
}

// TestARestartReadsTheWindowAndTheCounts: after a restart over an on-disk
// store, waiting work beyond the window is counted, due work within it
// is handed out at once, and the rest at its due time.
func TestARestartReadsTheWindowAndTheCounts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := engine.NewFakeClock(t0)
	open := func() (*harness, func()) {
		st, err := badgerstore.Open(dir, badgerstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(st, engine.Options{Clock: clock, WaitWindow: time.Minute, Jitter: func(d time.Duration) time.Duration { return d }})
		if err != nil {
			t.Fatal(err)
		}
		return &harness{t: t, e: e, clock: clock, store: st}, func() { e.Close(); st.Close() }
	}
	h, closeFirst := open()
	h.wait("wf", 4)
	h.startWithActivity("now", &durablev1.ActivityOptions{TaskQueue: "q", StartToCloseTimeout: dur(time.Minute)})
	closeFirst()

	h, closeSecond := open()
	defer closeSecond()
	if got := backlogOf(h.queue("q")); got != "1 ready, 4 later" {
		t.Errorf("backlog after the restart = %s, want 1 ready, 4 later", got)
	}
	gauges := map[durablev1.ActivityState]int{}
	for _, g := range h.e.Gauges().Activities {
		gauges[g.State] += g.Count
	}
	if gauges[retrying] != 4 || gauges[durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED] != 1 {
		t.Errorf("gauges after the restart = %v, want 4 retrying and 1 scheduled", gauges)
	}
	if task := h.pollActivity(); task == nil || task.GetWorkflowId() != "now" {
		t.Fatalf("the task due now after the restart: %v", task)
	}
	h.clock.Advance(time.Hour)
	for i := range 4 {
		if task := h.pollActivity(); task == nil || task.GetAttempt() != 2 {
			t.Fatalf("retry %d at its due time after the restart: %v", i, task)
		}
	}
}
