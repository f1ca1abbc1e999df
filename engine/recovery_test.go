package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// TestRecoveryAfterReopen puts activities in every state on an on-disk
// store, closes it, opens a new engine on the same directory and checks each
// is where it was: the scheduled one pollable, the retrying one due at the
// same instant, the dead letter listed, and the leased one failed as a
// timeout once its lease has passed, then delivered again.
func TestRecoveryAfterReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := engine.NewFakeClock(t0)
	open := func() (*harness, func()) {
		st, err := badgerstore.Open(dir, badgerstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(st, engine.Options{Clock: clock, Jitter: func(d time.Duration) time.Duration { return d }})
		if err != nil {
			t.Fatal(err)
		}
		return &harness{t: t, e: e, clock: clock}, func() { e.Close(); st.Close() }
	}
	h, closeFirst := open()
	opts := func(queue string) *durablev1.ActivityOptions {
		return &durablev1.ActivityOptions{TaskQueue: queue, StartToCloseTimeout: dur(time.Minute), RetryPolicy: &durablev1.RetryPolicy{InitialMs: 3_600_000, MaxIntervalMs: 3_600_000, MaxAttempts: 2}}
	}
	poll := func(h *harness, queue string) *durablev1.ActivityTask {
		r, err := h.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: queue, Identity: "w"})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetTasks()) == 0 {
			return nil
		}
		return r.GetTasks()[0]
	}
	h.startWithActivity("scheduled", opts("q-scheduled"))
	h.startWithActivity("leased", opts("q-leased"))
	leased := poll(h, "q-leased")
	h.startWithActivity("dead", opts("q-dead"))
	h.fail(poll(h, "q-dead"), &durablev1.Failure{Type: "Flaky"})
	h.clock.Advance(time.Hour)
	h.fail(poll(h, "q-dead"), &durablev1.Failure{Type: "Flaky"})
	h.startWithActivity("retrying", opts("q-retrying"))
	h.fail(poll(h, "q-retrying"), &durablev1.Failure{Type: "Flaky"})
	retryDue := h.describe("retrying").GetPendingActivities()[0].GetNextAttemptTime().AsTime()
	closeFirst()

	h, closeSecond := open()
	defer closeSecond()
	state := func(wf string) *durablev1.PendingActivity { return h.describe(wf).GetPendingActivities()[0] }
	if s := state("dead"); s.GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED {
		t.Errorf("dead letter came back as %v", s.GetState())
	}
	if got := state("retrying"); got.GetState() != durablev1.ActivityState_ACTIVITY_STATE_RETRYING || !got.GetNextAttemptTime().AsTime().Equal(retryDue) {
		t.Errorf("retrying came back %v due %v, want due %v", got.GetState(), got.GetNextAttemptTime().AsTime(), retryDue)
	}
	if task := poll(h, "q-scheduled"); task == nil || task.GetAttempt() != 1 {
		t.Errorf("scheduled task after reopen: %v", task)
	}
	// The leased attempt's lease (one minute) ran out during the hour above:
	// it is a StartToCloseTimeout, and attempt 2 was due an hour after it.
	if got := state("leased"); got.GetLastFailure().GetType() != engine.TimeoutStartToClose || got.GetAttempt() != 2 {
		t.Errorf("leased came back %v attempt %d, want a StartToCloseTimeout retry", got.GetLastFailure(), got.GetAttempt())
	}
	if _, err := h.e.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: leased.GetTaskToken()}); err == nil {
		t.Error("the lease from before the restart still completes")
	}
	if task := poll(h, "q-retrying"); task != nil {
		t.Fatal("retry delivered before its due time")
	}
	h.clock.Set(retryDue)
	if task := poll(h, "q-retrying"); task == nil || task.GetAttempt() != 2 {
		t.Errorf("retry at its due time: %v", task)
	}
	if task := poll(h, "q-leased"); task == nil || task.GetAttempt() != 2 {
		t.Errorf("the timed-out lease was not delivered again: %v", task)
	}
}
