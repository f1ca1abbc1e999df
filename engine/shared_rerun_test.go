package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	pgstore "github.com/tinyllm/durable/store/postgres"
)

// conflictingStore is a PostgreSQL store whose next transaction that
// claims a task of a given kind loses a conflict: its first run ends with a
// serialization failure (40001) after the engine's work, as when another
// transition of its batch conflicted with another node's, and before the
// store runs it again, between runs, runs. It is how a poll's lease
// transaction, run again, finds the task it leased in its first run gone to
// another node.
type conflictingStore struct {
	*pgstore.Store

	mu       sync.Mutex
	kind     engine.TaskKind
	armed    bool
	between  func()
	conflict int // transactions made to conflict
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

func (t *claimSpy) ClaimQueued(kind engine.TaskKind, queue string, now time.Time, limit int) ([]engine.QueueEntry, error) {
	es, err := t.SharedTx.ClaimQueued(kind, queue, now, limit)
	if len(es) > 0 {
		if t.claimed == nil {
			t.claimed = map[engine.TaskKind]bool{}
		}
		t.claimed[kind] = true
	}
	return es, err
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
