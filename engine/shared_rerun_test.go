package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	pgstore "github.com/tinyllm/durable/store/postgres"
)

// conflictingStore is a PostgreSQL store that makes transactions lose a
// conflict: the first run of a chosen transaction ends with a serialization
// failure (40001) after all of the engine's work, as when another
// transition of its batch conflicted with another node's, and the store
// runs it again. Armed by conflictOnce, it picks the next transaction that
// claims a task of a given kind and runs a function between the two runs
// (how a poll's lease transaction, run again, finds the task it leased in
// its first run gone to another node); with conflictEvery it picks
// transactions at random and pauses between the runs, which widens the
// window in which other nodes act (a provocation, not a wait for a
// condition).
type conflictingStore struct {
	*pgstore.Store

	mu       sync.Mutex
	kind     engine.TaskKind
	armed    bool
	between  func()
	conflict int // transactions made to conflict

	// One transaction in conflictEvery, at random, conflicts once (0:
	// none) and pauses for up to pause before it runs again.
	conflictEvery int
	pause         time.Duration
}

// conflictOnce arms s: the next transaction that claims a task of kind
// conflicts once, and between runs before it is run again.
func (s *conflictingStore) conflictOnce(kind engine.TaskKind, between func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kind, s.armed, s.between = kind, true, between
}

func (s *conflictingStore) conflicts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conflict
}

func (s *conflictingStore) Update(fn func(engine.Tx) error) error {
	runs := 0
	var between func()
	return s.Store.Update(func(tx engine.Tx) error {
		runs++
		if runs == 2 && between != nil {
			between()
		}
		spy := &claimSpy{SharedTx: tx.(engine.SharedTx)}
		err := fn(spy)
		if err != nil || runs > 1 {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.conflictEvery > 0 && rand.IntN(s.conflictEvery) == 0 {
			s.conflict++
			if s.pause > 0 {
				pause := time.Duration(rand.Int64N(int64(s.pause)))
				between = func() { time.Sleep(pause) }
			}
			return &pgconn.PgError{Code: "40001", Message: "could not serialize access due to concurrent update (made by the test)"}
		}
		if !s.armed || !spy.claimed[s.kind] {
			return nil
		}
		s.armed, between = false, s.between
		s.conflict++
		return &pgconn.PgError{Code: "40001", Message: "could not serialize access due to concurrent update (made by the test)"}
	})
}

// claimSpy notes which kinds of task a transaction claimed.
type claimSpy struct {
	engine.SharedTx
	claimed map[engine.TaskKind]bool
}

func (t *claimSpy) ClaimQueued(kind engine.TaskKind, queue string, now time.Time, limit int) (engine.Claimed, error) {
	got, err := t.SharedTx.ClaimQueued(kind, queue, now, limit)
	if len(got.Entries) > 0 {
		if t.claimed == nil {
			t.claimed = map[engine.TaskKind]bool{}
		}
		t.claimed[kind] = true
	}
	return got, err
}

// TestSharedNodesHandOutNothingFromALeaseTransactionThatWasRunAgain: node
// a's poll leases a task in the first run of its lease transaction, the
// run loses a conflict, node b leases the task before a's transaction runs
// again, and the run again finds nothing due. a's poll then answers what
// it leased in the run that committed, nothing: neither a token of the
// lease that was rolled back (a workflow task the worker would run with no
// history and whose completion would be refused as no longer held) nor the
// task b holds.
func TestSharedNodesHandOutNothingFromALeaseTransactionThatWasRunAgain(t *testing.T) {
	t.Parallel()
	for _, kind := range []engine.TaskKind{engine.WorkflowTask, engine.ActivityTask} {
		t.Run(map[engine.TaskKind]string{engine.WorkflowTask: "WorkflowTask", engine.ActivityTask: "ActivityTask"}[kind], func(t *testing.T) {
			t.Parallel()
			dsn := testpg.Database(t)
			open := func(name string) *pgstore.Store {
				st, err := pgstore.Open(dsn, pgstore.Options{MaxConns: 4, Node: name})
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			opts := engine.Options{PollTimeout: hangAfter}
			sa := &conflictingStore{Store: open("a")}
			a, err := engine.New(sa, opts)
			if err != nil {
				t.Fatal(err)
			}
			sb := open("b")
			b, err := engine.New(sb, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				a.Close()
				b.Close()
				sa.Close()
				sb.Close()
			})
			ctx := context.Background()
			if _, err := b.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "wf", WorkflowType: "W", TaskQueue: "q"}); err != nil {
				t.Fatal(err)
			}
			if kind == engine.ActivityTask {
				wt := pollWorkflowOn(t, b)
				if _, err := b.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
					Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge",
				}}}); err != nil {
					t.Fatal(err)
				}
			}

			// b's poll, between a's two runs, takes the task a's first
			// run leased and rolled back.
			var bToken []byte
			sa.conflictOnce(kind, func() {
				pctx, cancel := context.WithTimeout(ctx, hangAfter)
				defer cancel()
				if kind == engine.WorkflowTask {
					r, err := b.PollWorkflowTask(pctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "b"})
					if err != nil {
						t.Error(err)
					}
					bToken = r.GetTaskToken()
					return
				}
				r, err := b.PollActivityTask(pctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "b"})
				if err != nil {
					t.Error(err)
				}
				if len(r.GetTasks()) == 1 {
					bToken = r.GetTasks()[0].GetTaskToken()
				}
			})

			// a's poll parks once its run again found nothing; it answers
			// when its caller gives up.
			pctx, cancel := context.WithCancel(ctx)
			answered := make(chan [][]byte, 1)
			go func() {
				var tokens [][]byte
				if kind == engine.WorkflowTask {
					r, err := a.PollWorkflowTask(pctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "a"})
					if err != nil {
						t.Error(err)
					}
					if len(r.GetTaskToken()) > 0 {
						tokens = append(tokens, r.GetTaskToken())
					}
				} else {
					r, err := a.PollActivityTask(pctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "a"})
					if err != nil {
						t.Error(err)
					}
					for _, task := range r.GetTasks() {
						tokens = append(tokens, task.GetTaskToken())
					}
				}
				answered <- tokens
			}()
			waitUntil(t, "a's lease transaction to conflict and a's poll to park", func() bool {
				return sa.conflicts() == 1 && parked(a, kind) == 1
			})
			cancel()
			var tokens [][]byte
			select {
			case tokens = <-answered:
			case <-time.After(hangAfter):
				t.Fatal("a's poll did not answer once its caller gave up")
			}
			if len(bToken) == 0 {
				t.Fatal("b's poll got no task between a's runs")
			}
			if len(tokens) > 0 {
				_, err := complete(a, kind, tokens[0])
				t.Fatalf("a's poll answered %d tokens after its lease transaction, run again, leased nothing (completing the first: %v)", len(tokens), err)
			}
			// The task is b's, whole.
			if _, err := complete(b, kind, bToken); err != nil {
				t.Fatalf("completing the task b leased: %v", err)
			}
		})
	}
}

// complete reports success for the task token leases, through e.
func complete(e *engine.Engine, kind engine.TaskKind, token []byte) (*durablev1.Empty, error) {
	ctx := context.Background()
	if kind == engine.WorkflowTask {
		return e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: token})
	}
	return e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: token, Result: []byte("1")})
}

// TestSharedNodesHandEachTaskOutOnceWhileTransactionsConflict: three nodes,
// each with pollers of both kinds on one queue and short polls, and stores
// that make one transaction in four lose a conflict after its first run
// and pause before the next, so that the other nodes claim in between.
// Workflows fan out activities that fail their first attempt. Every
// attempt and every workflow task is handed out once, every report the
// pollers make is accepted, and every workflow completes.
func TestSharedNodesHandEachTaskOutOnceWhileTransactionsConflict(t *testing.T) {
	t.Parallel()
	const (
		workflows   = 6
		perWorkflow = 8
		pollers     = 2 // of each kind, per node
	)
	dsn := testpg.Database(t)
	opts := engine.Options{PollTimeout: 200 * time.Millisecond, WorkflowTaskTimeout: hangAfter, Logger: slog.New(slog.DiscardHandler),
		Jitter: func(d time.Duration) time.Duration { return d }}
	var engines []*engine.Engine
	var stores []*conflictingStore
	for _, name := range []string{"a", "b", "c"} {
		st, err := pgstore.Open(dsn, pgstore.Options{MaxConns: 4, Node: name})
		if err != nil {
			t.Fatal(err)
		}
		cs := &conflictingStore{Store: st, conflictEvery: 4, pause: 5 * time.Millisecond}
		e, err := engine.New(cs, opts)
		if err != nil {
			st.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			e.Close()
			st.Close()
		})
		engines, stores = append(engines, e), append(stores, cs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range workflows {
		if _, err := engines[i%3].StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: fmt.Sprint("wf-", i), WorkflowType: "FanOut", TaskQueue: "q"}); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	handed := map[string]int{} // attempt or workflow task → times handed out
	var problems []string
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	hand := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		if handed[what]++; handed[what] == 2 {
			problems = append(problems, what+" handed out twice")
		}
	}
	activityOpts := &durablev1.ActivityOptions{StartToCloseTimeout: dur(hangAfter), RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1, MaxIntervalMs: 10}}
	var wg sync.WaitGroup
	for n, e := range engines {
		for p := range pollers {
			identity := fmt.Sprintf("%d-%d", n, p)
			wg.Go(func() {
				for ctx.Err() == nil {
					r, err := e.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: identity, MaxTasks: 3})
					if err != nil {
						problem("activity poll: %v", err)
						return
					}
					for _, task := range r.GetTasks() {
						hand(fmt.Sprintf("attempt %d of %s/%s", task.GetAttempt(), task.GetWorkflowId(), task.GetActivityId()))
						var err error
						if task.GetAttempt() == 1 {
							_, err = e.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: &durablev1.Failure{Type: "Flaky", Message: "first attempt"}})
						} else {
							_, err = e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken(), Result: []byte("1")})
						}
						if err != nil && ctx.Err() == nil {
							problem("report of attempt %d of %s/%s: %v", task.GetAttempt(), task.GetWorkflowId(), task.GetActivityId(), err)
						}
					}
				}
			})
			wg.Go(func() {
				for ctx.Err() == nil {
					r, err := e.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: identity})
					if err != nil {
						problem("workflow poll: %v", err)
						return
					}
					if len(r.GetTaskToken()) == 0 {
						continue
					}
					h := r.GetHistory()
					if len(h) == 0 {
						problem("workflow task of %s handed out without history", r.GetWorkflowId())
						continue
					}
					hand(fmt.Sprintf("workflow task of %s at event %d", r.GetWorkflowId(), h[len(h)-1].GetEventId()))
					scheduled, completed := 0, 0
					for _, ev := range h {
						switch ev.GetType() {
						case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
							scheduled++
						case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
							completed++
						}
					}
					var cmds []*durablev1.Command
					switch {
					case scheduled == 0:
						for i := range perWorkflow {
							cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: strconv.Itoa(i), ActivityType: "Work", ActivityOptions: activityOpts})
						}
					case completed == perWorkflow:
						cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW})
					}
					if _, err := e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: r.GetTaskToken(), Commands: cmds}); err != nil && ctx.Err() == nil {
						problem("report of the workflow task of %s at event %d: %v", r.GetWorkflowId(), h[len(h)-1].GetEventId(), err)
					}
				}
			})
		}
	}
	for i := range workflows {
		wctx, wcancel := context.WithTimeout(ctx, hangAfter)
		for {
			d, err := engines[(i+1)%3].DescribeWorkflow(wctx, &durablev1.DescribeWorkflowRequest{WorkflowId: fmt.Sprint("wf-", i), WaitForClose: true})
			if err != nil {
				t.Fatalf("waiting for wf-%d to close: %v (so far: %v)", i, err, problems)
			}
			if d.GetWorkflow().GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
				break
			}
		}
		wcancel()
	}
	cancel()
	wg.Wait()
	conflicts := 0
	for _, s := range stores {
		conflicts += s.conflicts()
	}
	t.Logf("%d tasks handed out, %d transactions made to conflict", len(handed), conflicts)
	if conflicts == 0 {
		t.Error("no transaction was made to conflict")
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestSharedNodesCountALeaseFromTheRunOfItsTransactionThatCommits: a
// poll's lease transaction loses a conflict and, by the time it runs
// again, the clock has moved on 5 s (a node whose batches wait behind
// conflicting ones). The lease it hands out counts from the run that
// committed: an attempt's deadline is start-to-close from then, and a
// workflow task is still held a whole task timeout after the poll began.
func TestSharedNodesCountALeaseFromTheRunOfItsTransactionThatCommits(t *testing.T) {
	t.Parallel()
	const late = 5 * time.Second
	clock := engine.NewFakeClock(t0)
	st, err := pgstore.Open(testpg.Database(t), pgstore.Options{MaxConns: 4, Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	cs := &conflictingStore{Store: st}
	e, err := engine.New(cs, engine.Options{Clock: clock, WorkflowTaskTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	ctx := context.Background()
	if _, err := e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "wf", WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	cs.conflictOnce(engine.WorkflowTask, func() { clock.Advance(late) })
	wt := pollWorkflowOn(t, e)
	// A task timeout after the poll began, half of it after the lease.
	clock.Advance(10*time.Second - late + time.Millisecond)
	if _, err := e.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: "wf"}); err != nil {
		t.Fatal(err) // fires what is due
	}
	if _, err := e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge",
		ActivityOptions: &durablev1.ActivityOptions{StartToCloseTimeout: dur(time.Minute)},
	}}}); err != nil {
		t.Fatalf("completing a workflow task %s after its lease committed: %v", 10*time.Second-late, err)
	}

	cs.conflictOnce(engine.ActivityTask, func() { clock.Advance(late) })
	began := clock.Now()
	r, err := e.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetTasks()) != 1 {
		t.Fatalf("got %d tasks, want 1", len(r.GetTasks()))
	}
	task := r.GetTasks()[0]
	if got, want := task.GetStartedTime().AsTime(), began.Add(late); !got.Equal(want) {
		t.Errorf("started %s, want %s (when the lease committed)", got, want)
	}
	if got, want := task.GetDeadline().AsTime(), began.Add(late+time.Minute); !got.Equal(want) {
		t.Errorf("deadline %s, want %s (start-to-close from when the lease committed)", got, want)
	}
}
