package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// heldStore is a store whose syncs, once held, wait for the test: each
// held Sync reports that it has started and then does what the test says
// (sync, or fail with an error).
type heldStore struct {
	engine.Store
	held    atomic.Bool
	entered chan struct{}
	verdict chan error
	freed   chan struct{} // closed at the end of the test: nothing is held
}

func (s *heldStore) Sync() error {
	if !s.held.Load() {
		return s.Store.Sync()
	}
	select {
	case s.entered <- struct{}{}:
	case <-s.freed:
		return s.Store.Sync()
	}
	select {
	case err := <-s.verdict:
		if err != nil {
			return err
		}
	case <-s.freed:
	}
	return s.Store.Sync()
}

// setupHeld is setup over a heldStore whose syncs are not held yet.
func setupHeld(t *testing.T, opts engine.Options) (*harness, *heldStore) {
	t.Helper()
	var hs *heldStore
	h := setupOn(t, opts, func(st engine.Store) engine.Store {
		hs = &heldStore{Store: st, entered: make(chan struct{}), verdict: make(chan error), freed: make(chan struct{})}
		return hs
	})
	// Let a sync still held at the end through, so the engine can close.
	t.Cleanup(func() { close(hs.freed) })
	return h, hs
}

// awaitSync waits until a held sync has started.
func (s *heldStore) awaitSync(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no sync started", what)
	}
}

// park starts a poll of queue "q" that waits until it gets a task (the fake
// clock does not end it) and returns where the task arrives.
func (h *harness) park() <-chan *durablev1.ActivityTask {
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	return h.parkUntil(ctx)
}

// parkUntil is park until ctx ends.
func (h *harness) parkUntil(ctx context.Context) <-chan *durablev1.ActivityTask {
	got := make(chan *durablev1.ActivityTask, 1)
	go func() {
		for ctx.Err() == nil {
			r, err := h.e.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "parked"})
			if err != nil {
				return
			}
			if len(r.GetTasks()) > 0 {
				got <- r.GetTasks()[0]
				return
			}
		}
	}()
	return got
}

// parkWorkflow is park for the workflow tasks of queue "q".
func (h *harness) parkWorkflow() <-chan *durablev1.PollWorkflowTaskResponse {
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	got := make(chan *durablev1.PollWorkflowTaskResponse, 1)
	go func() {
		for ctx.Err() == nil {
			r, err := h.e.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "parked"})
			if err != nil {
				return
			}
			if len(r.GetTaskToken()) > 0 {
				got <- r
				return
			}
		}
	}()
	return got
}

// nothingHandedOut checks that neither the parked poll nor a poll made now
// gets a task. The poll made now answers at once when it finds nothing;
// one that found a task would wait for the batcher, held up by the sync, to
// lease it.
func (h *harness) nothingHandedOut(parked <-chan *durablev1.ActivityTask, what string) {
	h.t.Helper()
	select {
	case task := <-parked:
		h.t.Fatalf("%s: the parked poll got attempt %d of %s before the sync", what, task.GetAttempt(), task.GetActivityId())
	default:
	}
	probe := make(chan []*durablev1.ActivityTask, 1)
	go func() {
		r, _ := h.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "probe"})
		probe <- r.GetTasks()
	}()
	select {
	case tasks := <-probe:
		if len(tasks) > 0 {
			h.t.Fatalf("%s: a poll got attempt %d of %s before the sync", what, tasks[0].GetAttempt(), tasks[0].GetActivityId())
		}
	case <-time.After(10 * time.Second):
		h.t.Fatalf("%s: a poll found a task before the sync and waits to lease it", what)
	}
}

// handedOut waits for the parked poll's task and checks it is attempt of
// activity "1" of wf.
func handedOut(t *testing.T, parked <-chan *durablev1.ActivityTask, wf string, attempt int32) {
	t.Helper()
	select {
	case task := <-parked:
		if task.GetWorkflowId() != wf || task.GetActivityId() != "1" || task.GetAttempt() != attempt {
			t.Fatalf("the parked poll got %s/%s attempt %d, want %s/1 attempt %d", task.GetWorkflowId(), task.GetActivityId(), task.GetAttempt(), wf, attempt)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the parked poll got nothing after the sync")
	}
}

// answer waits for the result of a call running in a goroutine.
func answer(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never answered", what)
		return nil
	}
}

// notYet checks that a call running in a goroutine has not answered.
func notYet(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s answered (%v) before its sync", what, err)
	default:
	}
}

func scheduleOne(h *harness, opts *durablev1.ActivityOptions) <-chan error {
	h.t.Helper()
	wt := h.pollWorkflow()
	if wt == nil {
		h.t.Fatal("no workflow task")
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.e.CompleteWorkflowTask(context.Background(), &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
			Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge", ActivityOptions: opts,
		}}})
		done <- err
	}()
	return done
}

// TestNoTaskVisibleBeforeSync: a task that a transition queues (a started
// workflow's first workflow task, an activity scheduled, a retry after its
// backoff or after a lease ran out on the clock, a redrive, a redrive
// operation's release) is handed to no poll while the sync of its
// transaction is held, and to the poll that waits for it once the sync
// completes. A sync that fails publishes nothing: the caller gets the
// refusal of writes that follows it, and the task is handed out after a
// restart.
func TestNoTaskVisibleBeforeSync(t *testing.T) {
	t.Parallel()
	t.Run("ScheduledActivity", func(t *testing.T) {
		t.Parallel()
		h, s := setupHeld(t, engine.Options{})
		h.start("wf", "Flaky")
		parked := h.park()
		s.held.Store(true)
		done := scheduleOne(h, nil)
		s.awaitSync(t, "CompleteWorkflowTask")
		h.nothingHandedOut(parked, "scheduled")
		notYet(t, done, "CompleteWorkflowTask")
		s.verdict <- nil
		if err := answer(t, done, "CompleteWorkflowTask"); err != nil {
			t.Fatal(err)
		}
		handedOut(t, parked, "wf", 1)
	})
	t.Run("StartedWorkflow", func(t *testing.T) {
		t.Parallel()
		h, s := setupHeld(t, engine.Options{})
		parked := h.parkWorkflow()
		s.held.Store(true)
		done := make(chan error, 1)
		go func() {
			_, err := h.e.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{WorkflowId: "wf", WorkflowType: "Flaky", TaskQueue: "q"})
			done <- err
		}()
		s.awaitSync(t, "StartWorkflow")
		select {
		case wt := <-parked:
			t.Fatalf("the parked poll got the workflow task of %s before the sync", wt.GetWorkflowId())
		default:
		}
		probe := make(chan *durablev1.PollWorkflowTaskResponse, 1)
		go func() {
			r, _ := h.e.PollWorkflowTask(now(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "probe"})
			probe <- r
		}()
		select {
		case wt := <-probe:
			if len(wt.GetTaskToken()) > 0 {
				t.Fatalf("a poll got the workflow task of %s before the sync", wt.GetWorkflowId())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a poll found the workflow task before the sync and waits to lease it")
		}
		notYet(t, done, "StartWorkflow")
		s.verdict <- nil
		if err := answer(t, done, "StartWorkflow"); err != nil {
			t.Fatal(err)
		}
		select {
		case wt := <-parked:
			if wt.GetWorkflowId() != "wf" {
				t.Fatalf("the parked poll got the workflow task of %s, want wf", wt.GetWorkflowId())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the parked poll got nothing after the sync")
		}
	})
	t.Run("RetryAfterBackoff", func(t *testing.T) {
		t.Parallel()
		h, s := setupHeld(t, engine.Options{})
		h.startWithActivity("wf", &durablev1.ActivityOptions{StartToCloseTimeout: dur(time.Minute), RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000}})
		first := h.pollActivity()
		if first == nil {
			t.Fatal("no first attempt")
		}
		parked := h.park()
		s.held.Store(true)
		done := make(chan error, 1)
		go func() {
			_, err := h.e.FailActivityTask(context.Background(), &durablev1.FailActivityRequest{TaskToken: first.GetTaskToken(), Failure: &durablev1.Failure{Type: "Flaky", Message: "try again"}})
			done <- err
		}()
		s.awaitSync(t, "FailActivityTask")
		// The backoff is over, but the transition that queued the retry is
		// not on disk yet.
		h.clock.Advance(2 * time.Second)
		h.nothingHandedOut(parked, "retry after the backoff")
		notYet(t, done, "FailActivityTask")
		s.verdict <- nil
		if err := answer(t, done, "FailActivityTask"); err != nil {
			t.Fatal(err)
		}
		handedOut(t, parked, "wf", 2)
	})
	t.Run("RetryAfterLeaseRanOut", func(t *testing.T) {
		t.Parallel()
		h, s := setupHeld(t, engine.Options{})
		h.startWithActivity("wf", &durablev1.ActivityOptions{StartToCloseTimeout: dur(10 * time.Second), RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000}})
		if task := h.pollActivity(); task == nil {
			t.Fatal("no first attempt")
		}
		parked := h.park()
		s.held.Store(true)
		// The lease runs out at +10 s and the retry is due at +11 s: the
		// timer's transition queues it, due at once, and waits for its sync.
		h.clock.Advance(11 * time.Second)
		s.awaitSync(t, "the timer's retry")
		// A poll made now would wait for the timer's transition to be
		// published: only the parked one is looked at.
		select {
		case task := <-parked:
			t.Fatalf("the parked poll got attempt %d before the sync", task.GetAttempt())
		default:
		}
		s.verdict <- nil
		handedOut(t, parked, "wf", 2)
	})
	t.Run("Redrive", func(t *testing.T) {
		t.Parallel()
		h, s := setupHeld(t, engine.Options{})
		h.deadLetter("wf", "Down")
		parked := h.park()
		s.held.Store(true)
		done := make(chan error, 1)
		go func() {
			_, err := h.e.RedriveDeadLetter(context.Background(), alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf", ActivityId: "1", Reason: "fixed"})
			done <- err
		}()
		s.awaitSync(t, "RedriveDeadLetter")
		h.nothingHandedOut(parked, "redriven")
		notYet(t, done, "RedriveDeadLetter")
		s.verdict <- nil
		if err := answer(t, done, "RedriveDeadLetter"); err != nil {
			t.Fatal(err)
		}
		handedOut(t, parked, "wf", 1)
	})
	t.Run("RedriveOperation", func(t *testing.T) {
		t.Parallel()
		h, s := setupHeld(t, engine.Options{})
		h.deadLetter("wf", "Down")
		parked := h.park()
		s.held.Store(true)
		done := make(chan error, 1)
		go func() {
			_, err := h.e.RedriveDeadLetters(context.Background(), alice, &durablev1.RedriveDeadLettersRequest{Rate: 1, Reason: "fixed"})
			done <- err
		}()
		s.awaitSync(t, "RedriveDeadLetters")
		s.verdict <- nil // the operation's start
		if err := answer(t, done, "RedriveDeadLetters"); err != nil {
			t.Fatal(err)
		}
		s.awaitSync(t, "the operation's first release")
		h.nothingHandedOut(parked, "released")
		s.verdict <- nil
		handedOut(t, parked, "wf", 1)
	})
	t.Run("FailedSync", func(t *testing.T) {
		t.Parallel()
		h, s := setupHeld(t, engine.Options{})
		h.start("wf", "Flaky")
		ctx, stop := context.WithCancel(context.Background())
		parked := h.parkUntil(ctx)
		s.held.Store(true)
		done := scheduleOne(h, nil)
		s.awaitSync(t, "CompleteWorkflowTask")
		diskGone := errors.New("input/output error")
		s.verdict <- diskGone
		err := answer(t, done, "CompleteWorkflowTask")
		if !errors.Is(err, engine.ErrWritesRefused) || !errors.Is(err, diskGone) {
			t.Fatalf("CompleteWorkflowTask after a failed sync: %v, want a refusal wrapping the store's error", err)
		}
		h.nothingHandedOut(parked, "after a failed sync")
		// A restart queues again what the store holds.
		stop()
		s.held.Store(false)
		h.e.Close()
		e, err := engine.New(s, engine.Options{Clock: h.clock, Jitter: func(d time.Duration) time.Duration { return d }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		r, err := e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "after"})
		if err != nil || len(r.GetTasks()) != 1 || r.GetTasks()[0].GetWorkflowId() != "wf" {
			t.Fatalf("after a restart: %v, %v; want attempt 1 of wf's activity", r.GetTasks(), err)
		}
	})
}
