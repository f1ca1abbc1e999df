package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// prefetchStore is a store whose transactions are engine.Prefetchers that
// note the keys they are asked for and, when fail is set, fail.
type prefetchStore struct {
	engine.Store
	mu   sync.Mutex
	keys [][]engine.RecordKey
	fail bool
}

type prefetchTx struct {
	engine.Tx
	s *prefetchStore
}

func (s *prefetchStore) Update(fn func(engine.Tx) error) error {
	return s.Store.Update(func(tx engine.Tx) error { return fn(&prefetchTx{Tx: tx, s: s}) })
}

func (t *prefetchTx) Prefetch(keys []engine.RecordKey) error {
	t.s.mu.Lock()
	t.s.keys = append(t.s.keys, slices.Clone(keys))
	fail := t.s.fail
	t.s.mu.Unlock()
	if fail {
		return errors.New("prefetch refused")
	}
	if p, ok := t.Tx.(engine.Prefetcher); ok {
		return p.Prefetch(keys)
	}
	return nil
}

// asked returns the keys prefetched since the last call.
func (s *prefetchStore) asked() [][]engine.RecordKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys
	s.keys = nil
	return k
}

func setupPrefetch(t *testing.T) (*harness, *prefetchStore) {
	t.Helper()
	var ps *prefetchStore
	h := setupOn(t, engine.Options{}, func(st engine.Store) engine.Store {
		ps = &prefetchStore{Store: st}
		return ps
	})
	return h, ps
}

func TestCompletionReadsItsActivityAndWorkflowAheadAndHeartbeatItsActivity(t *testing.T) {
	h, ps := setupPrefetch(t)
	h.startWithActivity("wf", nil)
	task := h.pollActivity()
	ps.asked()
	if _, err := h.e.RecordHeartbeat(context.Background(), &durablev1.HeartbeatRequest{TaskToken: task.GetTaskToken()}); err != nil {
		t.Fatal(err)
	}
	if got, want := ps.asked(), [][]engine.RecordKey{{{WorkflowID: "wf", ActivityID: "1"}}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("a heartbeat read ahead %v, want %v", got, want)
	}
	h.complete(task)
	if got, want := ps.asked(), [][]engine.RecordKey{{{WorkflowID: "wf", ActivityID: "1"}, {WorkflowID: "wf"}}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("a completion read ahead %v, want %v", got, want)
	}
	// Its token, once the activity is gone, reads ahead a missing record:
	// the completion is refused as stale, as without a read ahead.
	_, err := h.e.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()})
	if !errors.Is(err, engine.ErrStaleTask) {
		t.Errorf("completing again: %v, want ErrStaleTask", err)
	}
}

func TestAReadAheadThatFailsLeavesTheBatchToRunWithoutIt(t *testing.T) {
	h, ps := setupPrefetch(t)
	h.startWithActivity("wf", nil)
	task := h.pollActivity()
	ps.mu.Lock()
	ps.fail = true
	ps.mu.Unlock()
	ps.asked()
	h.fail(task, &durablev1.Failure{Message: "boom", Type: "Transient"})
	if got := ps.asked(); len(got) != 1 {
		t.Errorf("read aheads: %v, want the one that failed", got)
	}
	retry := h.wantState("wf", durablev1.ActivityState_ACTIVITY_STATE_RETRYING)
	if retry.GetLastFailure().GetMessage() != "boom" {
		t.Errorf("after the failure: last failure %v, want boom", retry.GetLastFailure())
	}
	_, err := h.e.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()})
	if !errors.Is(err, engine.ErrStaleTask) {
		t.Errorf("completing the failed attempt: %v, want ErrStaleTask", err)
	}
}
