package engine_test

import (
	"context"
	"errors"
	"slices"
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
// hands out wf's activity while the sync is held, and returns where the
// task of either arrives once it is let through. Either may take the task
// meanwhile: a task due at once is queued at its commit and its lease
// commits beside the sync, but the poll that took it answers only after
// the sync (handout.go). So it waits until the poll made now has answered
// (with nothing: it found no task) or the activity is leased, then checks
// that neither poll has answered with a task.
func (h *harness) nothingHandedOut(parked <-chan *durablev1.ActivityTask, wf, what string) <-chan *durablev1.ActivityTask {
	h.t.Helper()
	probe := make(chan []*durablev1.ActivityTask, 1)
	go func() {
		r, _ := h.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "probe"})
		probe <- r.GetTasks()
	}()
	var probed []*durablev1.ActivityTask
	answered := false
	waitFor(h.t, what+": the poll made now to answer, or the activity to be leased", func() bool {
		select {
		case probed = <-probe:
			answered = true
			return true
		default:
		}
		for _, a := range h.describe(wf).GetPendingActivities() {
			if a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_STARTED {
				return true
			}
		}
		return false
	})
	if len(probed) > 0 {
		h.t.Fatalf("%s: a poll got attempt %d of %s before the sync", what, probed[0].GetAttempt(), probed[0].GetActivityId())
	}
	select {
	case task := <-parked:
		h.t.Fatalf("%s: the parked poll got attempt %d of %s before the sync", what, task.GetAttempt(), task.GetActivityId())
	default:
	}
	either := make(chan *durablev1.ActivityTask, 2)
	go func() {
		if !answered {
			if tasks := <-probe; len(tasks) > 0 {
				either <- tasks[0]
			}
		}
	}()
	go func() {
		select {
		case task := <-parked:
			either <- task
		case <-h.t.Context().Done():
		}
	}()
	return either
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

// answerOf waits for what a poll running in a goroutine answers.
func answerOf[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never answered", what)
		var zero T
		return zero
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
		got := h.nothingHandedOut(parked, "wf", "scheduled")
		notYet(t, done, "CompleteWorkflowTask")
		s.verdict <- nil
		if err := answer(t, done, "CompleteWorkflowTask"); err != nil {
			t.Fatal(err)
		}
		handedOut(t, got, "wf", 1)
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
		// As with nothingHandedOut: the parked poll or the one made now
		// may lease the task beside the sync, and neither answers before
		// it.
		probe := make(chan *durablev1.PollWorkflowTaskResponse, 1)
		go func() {
			r, _ := h.e.PollWorkflowTask(now(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "probe"})
			probe <- r
		}()
		var probed *durablev1.PollWorkflowTaskResponse
		waitFor(t, "the poll made now to answer, or the task to be leased", func() bool {
			select {
			case probed = <-probe:
				return true
			default:
			}
			return slices.ContainsFunc(h.history("wf"), func(ev *durablev1.HistoryEvent) bool {
				return ev.GetType() == durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED
			})
		})
		if len(probed.GetTaskToken()) > 0 {
			t.Fatalf("a poll got the workflow task of %s before the sync", probed.GetWorkflowId())
		}
		select {
		case wt := <-parked:
			t.Fatalf("the parked poll got the workflow task of %s before the sync", wt.GetWorkflowId())
		default:
		}
		notYet(t, done, "StartWorkflow")
		s.verdict <- nil
		if err := answer(t, done, "StartWorkflow"); err != nil {
			t.Fatal(err)
		}
		if probed == nil {
			probed = answerOf(t, probe, "the poll made now")
		}
		if len(probed.GetTaskToken()) == 0 {
			probed = answerOf(t, parked, "the parked poll")
		}
		if probed.GetWorkflowId() != "wf" {
			t.Fatalf("a poll got the workflow task of %s, want wf", probed.GetWorkflowId())
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
		got := h.nothingHandedOut(parked, "wf", "retry after the backoff")
		notYet(t, done, "FailActivityTask")
		s.verdict <- nil
		if err := answer(t, done, "FailActivityTask"); err != nil {
			t.Fatal(err)
		}
		handedOut(t, got, "wf", 2)
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
		got := h.nothingHandedOut(parked, "wf", "redriven")
		notYet(t, done, "RedriveDeadLetter")
		s.verdict <- nil
		if err := answer(t, done, "RedriveDeadLetter"); err != nil {
			t.Fatal(err)
		}
		handedOut(t, got, "wf", 1)
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
		got := h.nothingHandedOut(parked, "wf", "released")
		s.verdict <- nil
		handedOut(t, got, "wf", 1)
	})
	t.Run("FailedSync", func(t *testing.T) {
		t.Parallel()
		h, s := setupHeld(t, engine.Options{})
		h.start("wf", "Flaky")
		s.held.Store(true)
		done := scheduleOne(h, nil)
		s.awaitSync(t, "CompleteWorkflowTask")
		diskGone := errors.New("input/output error")
		s.verdict <- diskGone
		err := answer(t, done, "CompleteWorkflowTask")
		if !errors.Is(err, engine.ErrWritesRefused) || !errors.Is(err, diskGone) {
			t.Fatalf("CompleteWorkflowTask after a failed sync: %v, want a refusal wrapping the store's error", err)
		}
		ctx, stop := context.WithCancel(context.Background())
		parked := h.parkUntil(ctx)
		h.nothingHandedOut(parked, "wf", "after a failed sync")
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

// TestATaskTakenBesideAFailedSyncIsNotHandedOut: a poll parked when an
// activity is scheduled takes its task and commits the lease while the
// schedule's sync runs (handout.go). When that sync fails, the poll hands
// out nothing. The lease stays in the store, so after a restart the
// activity is delivered again once the lease has run out.
func TestATaskTakenBesideAFailedSyncIsNotHandedOut(t *testing.T) {
	t.Parallel()
	h, s := setupHeld(t, engine.Options{})
	h.start("wf", "Flaky")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	polled := make(chan []*durablev1.ActivityTask, 1)
	go func() {
		r, _ := h.e.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "parked"})
		polled <- r.GetTasks()
	}()
	waitFor(t, "the poll to park", func() bool { return h.e.ParkedPolls("q") == 1 })
	s.held.Store(true)
	done := scheduleOne(h, &durablev1.ActivityOptions{StartToCloseTimeout: dur(10 * time.Second), RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000}})
	s.awaitSync(t, "CompleteWorkflowTask")
	waitFor(t, "the lease beside the sync", func() bool {
		a := h.describe("wf").GetPendingActivities()
		return len(a) == 1 && a[0].GetState() == durablev1.ActivityState_ACTIVITY_STATE_STARTED
	})
	s.verdict <- errors.New("input/output error")
	if err := answer(t, done, "CompleteWorkflowTask"); !errors.Is(err, engine.ErrWritesRefused) {
		t.Fatalf("CompleteWorkflowTask after a failed sync: %v, want writes refused", err)
	}
	// The poll goes on waiting, as polls do while writes are refused; it
	// answers when its caller gives up, with nothing.
	stop()
	select {
	case tasks := <-polled:
		if len(tasks) > 0 {
			t.Fatalf("the poll handed out attempt %d after its sync failed", tasks[0].GetAttempt())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poll never answered")
	}

	s.held.Store(false)
	h.e.Close()
	e, err := engine.New(s, engine.Options{Clock: h.clock, Jitter: func(d time.Duration) time.Duration { return d }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	poll := func() []*durablev1.ActivityTask {
		r, err := e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "after"})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetTasks()
	}
	if tasks := poll(); len(tasks) > 0 {
		t.Fatalf("after a restart, before the lease ran out: attempt %d handed out, want nothing", tasks[0].GetAttempt())
	}
	// The lease runs out at +10 s, the retry is due 1 s later.
	h.clock.Advance(11 * time.Second)
	var tasks []*durablev1.ActivityTask
	waitFor(t, "the retry after the lease ran out", func() bool { tasks = poll(); return len(tasks) > 0 })
	if tasks[0].GetWorkflowId() != "wf" || tasks[0].GetAttempt() != 2 {
		t.Fatalf("after the lease ran out: %s attempt %d, want wf attempt 2", tasks[0].GetWorkflowId(), tasks[0].GetAttempt())
	}
}

// TestATaskDueAtOnceIsLeasedBesideItsSync: a task that a batch makes due at
// once is queued at the batch's commit. A parked poll takes it and commits
// its lease while the batch's sync runs (handout.go), so neither the poll's
// wake-up nor the lease's commit waits for the disk. The poll answers only
// once the sync has returned.
func TestATaskDueAtOnceIsLeasedBesideItsSync(t *testing.T) {
	t.Parallel()
	t.Run("Activity", func(t *testing.T) {
		t.Parallel()
		h, s := setupHeld(t, engine.Options{})
		h.start("wf", "Flaky")
		parked := h.park()
		waitFor(t, "the poll to park", func() bool { return h.e.ParkedPolls("q") == 1 })
		s.held.Store(true)
		done := scheduleOne(h, nil)
		s.awaitSync(t, "CompleteWorkflowTask")
		waitFor(t, "the lease beside the sync", func() bool {
			a := h.describe("wf").GetPendingActivities()
			return len(a) == 1 && a[0].GetState() == durablev1.ActivityState_ACTIVITY_STATE_STARTED
		})
		select {
		case task := <-parked:
			t.Fatalf("the poll handed out attempt %d before the sync", task.GetAttempt())
		default:
		}
		notYet(t, done, "CompleteWorkflowTask")
		s.verdict <- nil
		if err := answer(t, done, "CompleteWorkflowTask"); err != nil {
			t.Fatal(err)
		}
		handedOut(t, parked, "wf", 1)
	})
	t.Run("WorkflowTask", func(t *testing.T) {
		t.Parallel()
		h, s := setupHeld(t, engine.Options{})
		h.startWithActivity("wf", nil)
		task := h.pollActivity()
		if task == nil {
			t.Fatal("no attempt")
		}
		parked := h.parkWorkflow()
		s.held.Store(true)
		done := make(chan error, 1)
		go func() {
			_, err := h.e.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken(), Result: []byte("ok")})
			done <- err
		}()
		s.awaitSync(t, "CompleteActivityTask")
		started := func() int {
			n := 0
			for _, ev := range h.history("wf") {
				if ev.GetType() == durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED {
					n++
				}
			}
			return n
		}
		waitFor(t, "the lease beside the sync", func() bool { return started() == 2 })
		select {
		case wt := <-parked:
			t.Fatalf("the poll handed out the workflow task of %s before the sync", wt.GetWorkflowId())
		default:
		}
		notYet(t, done, "CompleteActivityTask")
		s.verdict <- nil
		if err := answer(t, done, "CompleteActivityTask"); err != nil {
			t.Fatal(err)
		}
		wt := answerOf(t, parked, "the parked poll")
		if !slices.ContainsFunc(wt.GetHistory(), func(ev *durablev1.HistoryEvent) bool {
			return ev.GetType() == durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED
		}) {
			t.Fatalf("the workflow task handed out after the sync lacks the activity's completion: %v", wt.GetHistory())
		}
	})
}
