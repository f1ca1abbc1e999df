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

// countedStore is a heldStore that counts its commits: a commit that lands
// while a held sync waits is one the batcher made beside that sync.
type countedStore struct {
	*heldStore
	commits atomic.Int64
}

func (s *countedStore) Update(fn func(engine.Tx) error) error {
	err := s.heldStore.Update(fn)
	s.commits.Add(1)
	return err
}

// setupCounted is setupHeld with the commits counted.
func setupCounted(t *testing.T) (*harness, *countedStore) {
	t.Helper()
	var cs *countedStore
	h := setupOn(t, engine.Options{}, func(st engine.Store) engine.Store {
		cs = &countedStore{heldStore: &heldStore{Store: st, entered: make(chan struct{}), verdict: make(chan error), freed: make(chan struct{})}}
		return cs
	})
	t.Cleanup(func() { close(cs.freed) })
	return h, cs
}

// startAsync starts workflow wf in a goroutine and returns where its answer
// arrives.
func (h *harness) startAsync(wf string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := h.e.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "Flaky", TaskQueue: "q"})
		done <- err
	}()
	return done
}

// pollOnce polls queue "q" once, without waiting for a task to come, in a
// goroutine, and returns where the task it leased (or nil) arrives.
func (h *harness) pollOnce() <-chan *durablev1.ActivityTask {
	leased := make(chan *durablev1.ActivityTask, 1)
	go func() {
		r, _ := h.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "worker-1"})
		if len(r.GetTasks()) == 0 {
			leased <- nil
			return
		}
		leased <- r.GetTasks()[0]
	}()
	return leased
}

// leasedDuringSync waits for the answer of pollOnce and checks that it is
// the activity of wf.
func leasedDuringSync(t *testing.T, leased <-chan *durablev1.ActivityTask, wf string) *durablev1.ActivityTask {
	t.Helper()
	select {
	case task := <-leased:
		if task.GetWorkflowId() != wf {
			t.Fatalf("the poll got %v, want the activity of %s", task, wf)
		}
		return task
	case <-time.After(10 * time.Second):
		t.Fatal("the lease waited for the sync under way")
		return nil
	}
}

// TestALeaseIsAnsweredWhileASyncRuns: a poll that takes a task already
// published is committed and answered while the sync of another batch
// runs, not after it; the transition that waits for the sync is answered
// only once it returns.
func TestALeaseIsAnsweredWhileASyncRuns(t *testing.T) {
	t.Parallel()
	h, s := setupCounted(t)
	h.startWithActivity("a", nil)
	s.held.Store(true)
	started := h.startAsync("b")
	s.awaitSync(t, "b's start")

	leasedDuringSync(t, h.pollOnce(), "a")
	notYet(t, started, "b's StartWorkflow")
	s.verdict <- nil
	if err := answer(t, started, "b's StartWorkflow"); err != nil {
		t.Fatal(err)
	}
}

// TestATransitionArrivingDuringASyncWaitsForTheNextBatch: only leases commit
// while a sync runs. Anything else that arrives meanwhile is kept back and
// committed in the batch after the sync, which has a sync of its own.
func TestATransitionArrivingDuringASyncWaitsForTheNextBatch(t *testing.T) {
	t.Parallel()
	h, s := setupCounted(t)
	h.startWithActivity("a", nil)
	s.held.Store(true)
	startedB := h.startAsync("b")
	s.awaitSync(t, "b's start")

	before := s.commits.Load()
	startedC := h.startAsync("c")
	leasedDuringSync(t, h.pollOnce(), "a")
	if got := s.commits.Load(); got != before+1 {
		t.Fatalf("%d commits while the sync ran, want the lease's alone: c's start waits for the next batch", got-before)
	}
	notYet(t, startedC, "c's StartWorkflow")

	s.verdict <- nil
	if err := answer(t, startedB, "b's StartWorkflow"); err != nil {
		t.Fatal(err)
	}
	s.awaitSync(t, "c's start")
	if got := s.commits.Load(); got != before+2 {
		t.Fatalf("%d commits after the first sync, want the lease's and c's batch", got-before)
	}
	notYet(t, startedC, "c's StartWorkflow")
	s.verdict <- nil
	if err := answer(t, startedC, "c's StartWorkflow"); err != nil {
		t.Fatal(err)
	}
}

// TestAFailedSyncRefusesWhatWasKeptBackDuringIt: when the sync fails, what
// it covered is refused, and so is what arrived during it and was kept back
// (writes are refused from then on); a lease committed beside it was
// answered at its commit, and its attempt is delivered again after a
// restart, as any lease a crash takes back.
func TestAFailedSyncRefusesWhatWasKeptBackDuringIt(t *testing.T) {
	t.Parallel()
	h, s := setupCounted(t)
	h.startWithActivity("a", nil)
	s.held.Store(true)
	startedB := h.startAsync("b")
	s.awaitSync(t, "b's start")
	task := leasedDuringSync(t, h.pollOnce(), "a")
	startedC := h.startAsync("c")
	notYet(t, startedC, "c's StartWorkflow")

	diskGone := errors.New("input/output error")
	s.verdict <- diskGone
	for _, c := range []struct {
		name string
		done <-chan error
	}{{"b", startedB}, {"c", startedC}} {
		err := answer(t, c.done, c.name+"'s StartWorkflow")
		if !errors.Is(err, engine.ErrWritesRefused) {
			t.Fatalf("%s's StartWorkflow after a failed sync: %v, want writes refused", c.name, err)
		}
	}
	_, err := h.e.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()})
	if !errors.Is(err, engine.ErrWritesRefused) {
		t.Fatalf("completing the lease after a failed sync: %v, want writes refused", err)
	}
}
