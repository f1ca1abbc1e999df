package engine_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	pgstore "github.com/tinyllm/durable/store/postgres"
)

// claimCountingStore is a PostgreSQL store that counts the queue claims of
// activity tasks and, once armed, runs a function at the start of the next
// transaction (before the engine's work in it).
type claimCountingStore struct {
	*pgstore.Store

	mu     sync.Mutex
	claims int
	before func()
}

func (s *claimCountingStore) Update(fn func(engine.Tx) error) error {
	s.mu.Lock()
	before := s.before
	s.before = nil
	s.mu.Unlock()
	if before != nil {
		before()
	}
	return s.Store.Update(func(tx engine.Tx) error {
		return fn(&claimCounter{SharedTx: tx.(engine.SharedTx), s: s})
	})
}

func (s *claimCountingStore) activityClaims() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims
}

type claimCounter struct {
	engine.SharedTx
	s *claimCountingStore
}

func (t *claimCounter) ClaimQueued(kind engine.TaskKind, queue string, now time.Time, limit int) (engine.Claimed, error) {
	if kind == engine.ActivityTask {
		t.s.mu.Lock()
		t.s.claims++
		t.s.mu.Unlock()
	}
	return t.SharedTx.ClaimQueued(kind, queue, now, limit)
}

// TestSharedPollTakesWhatFellDueBeforeItsClaimRan: a retry falls due
// between the moment a poll looks and the run of its lease transaction
// (here the clock moves at the transaction's start; in a busy node, the
// batches ahead of it take that time). The claim is as of its own run, so
// it takes the retry at once: one claim, not one that misses it and a
// second when the queue's alarm, set for a time already past, rings.
func TestSharedPollTakesWhatFellDueBeforeItsClaimRan(t *testing.T) {
	t.Parallel()
	clock := engine.NewFakeClock(t0)
	st, err := pgstore.Open(testpg.Database(t), pgstore.Options{MaxConns: 4, Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	cs := &claimCountingStore{Store: st}
	e, err := engine.New(cs, engine.Options{Clock: clock, Jitter: func(d time.Duration) time.Duration { return d }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), hangAfter)
	defer cancel()
	scheduleActivities(t, e, "wf", &durablev1.ActivityOptions{
		StartToCloseTimeout: dur(time.Minute),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 1000, MaxIntervalMs: 1000, MaxAttempts: 3},
	}, "1")
	r, err := e.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || len(r.GetTasks()) != 1 {
		t.Fatalf("first attempt: %v, %v", r, err)
	}
	if _, err := e.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: r.GetTasks()[0].GetTaskToken(), Failure: &durablev1.Failure{Message: "flaky"}}); err != nil {
		t.Fatal(err)
	}

	// The retry is due at t0+1s. The poll looks before it, and its lease
	// transaction runs two seconds later.
	claims := cs.activityClaims()
	cs.mu.Lock()
	cs.before = func() { clock.Advance(2 * time.Second) }
	cs.mu.Unlock()
	r, err = e.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetTasks()) != 1 || r.GetTasks()[0].GetAttempt() != 2 {
		t.Fatalf("got %v, want the second attempt", r.GetTasks())
	}
	if n := cs.activityClaims() - claims; n != 1 {
		t.Errorf("the poll claimed %d times, want once", n)
	}
}
