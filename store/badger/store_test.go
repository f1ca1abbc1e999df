package badger

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// openMemory returns an empty in-memory store closed when the test ends.
func openMemory(t *testing.T) engine.Store {
	t.Helper()
	s, err := Open("", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openDisk returns an empty on-disk store closed when the test ends.
func openDisk(t *testing.T) engine.Store {
	t.Helper()
	return openDir(t, t.TempDir())
}

func openDir(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// reopenDisk closes s and opens its directory again.
func reopenDisk(t *testing.T, s engine.Store) engine.Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return openDir(t, s.(*Store).dir)
}

func TestStore_Suite(t *testing.T) {
	t.Parallel()
	t.Run("InMemory", func(t *testing.T) {
		t.Parallel()
		runStoreSuite(t, openMemory, func(_ *testing.T, s engine.Store) engine.Store { return s })
	})
	t.Run("OnDiskReopened", func(t *testing.T) {
		t.Parallel()
		runStoreSuite(t, openDisk, reopenDisk)
	})
}

// TestStore_ReopenRecoversEverything writes records in every state, closes
// the store, opens the same directory and checks records and indexes.
func TestStore_ReopenRecoversEverything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	workflows := []*durablev1.WorkflowRecord{
		newWorkflow("w-none", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, 0, 0),
		newWorkflow("w-sched", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED, time.Second, 1),
		newWorkflow("w-started", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_STARTED, 2*time.Second, 2),
	}
	activities := []*durablev1.ActivityRecord{
		newActivity("w-sched", "1", scheduled, 3*time.Second, 3),
		newActivity("w-sched", "2", started, 4*time.Second, 4),
		newActivity("w-started", "1", retrying, 5*time.Second, 5),
		newActivity("w-started", "2", deadLettered, 6*time.Second, 6),
	}
	timer := &durablev1.TimerRecord{WorkflowId: "w-none", TimerId: "t", FireTime: at(7 * time.Second), StartedEventId: 5}
	latency := &durablev1.LatencyRecord{ActivityType: "Charge", Attempts: 2, Buckets: []int64{1, 1}}
	event := &durablev1.HistoryEvent{EventId: 1, Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, WorkflowType: "Order"}
	err := s.Update(func(tx engine.Tx) error {
		for _, w := range workflows {
			if err := tx.PutWorkflow(w); err != nil {
				return err
			}
		}
		return errors.Join(
			putActivities(activities...)(tx),
			tx.PutTimer(timer), tx.PutLatency(latency), tx.SetCounter(77),
			tx.AppendEvents("w-none", []*durablev1.HistoryEvent{event}),
		)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, s: s, reopenFunc: reopenDisk}
	h.written()

	h.view(func(tx engine.Tx) error {
		for _, w := range workflows {
			got, err := tx.GetWorkflow(w.GetInfo().GetWorkflowId())
			if err != nil {
				return err
			}
			wantEqual(t, "workflow", got, w)
		}
		for _, a := range activities {
			got, err := tx.GetActivity(a.GetInfo().GetWorkflowId(), a.GetInfo().GetActivityId())
			if err != nil {
				return err
			}
			wantEqual(t, "activity", got, a)
		}
		gotTimer, err := tx.GetTimer("w-none", "t")
		if err != nil {
			return err
		}
		wantEqual(t, "timer", gotTimer, timer)
		gotLatency, err := tx.GetLatency("Charge")
		if err != nil {
			return err
		}
		wantEqual(t, "latency", gotLatency, latency)
		hist, err := tx.History("w-none")
		if err != nil || len(hist) != 1 {
			t.Fatalf("history = %v, %v; want one event", hist, err)
		}
		wantEqual(t, "event", hist[0], event)
		if n, err := tx.Counter(); err != nil || n != 77 {
			t.Errorf("counter = %d, %v; want 77", n, err)
		}
		return nil
	})
	wantStrings(t, "workflow queue", h.queued(engine.WorkflowTask, "q", 10), []string{"w-sched/@1s#1"})
	wantStrings(t, "activity queue", h.queued(engine.ActivityTask, "q", 10), []string{"w-sched/1@3s#3", "w-started/1@5s#5"})
	wantStrings(t, "timers", h.timers(10), []string{"wtlease:w-started/@2s", "lease:w-sched/2@4s", "user:w-none/t@7s"})
	wantStrings(t, "dead letters", h.deadLetters(), []string{"w-started/2"})
	checkIndexes(t, h.s.(*Store))
}

func TestStore_UpdateRetriesConflicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		conflicts int // how many attempts a concurrent writer spoils
		wantCalls int
		wantErr   error
		wantCount int64
	}{
		{"OneConflict", 1, 2, nil, 101},
		{"NineConflicts", 9, 10, nil, 901},
		{"AlwaysConflicting", 1000, maxConflictAttempts, badgerdb.ErrConflict, maxConflictAttempts * 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openMemory(t)
			calls := 0
			err := s.Update(func(tx engine.Tx) error {
				calls++
				n, err := tx.Counter()
				if err != nil {
					return err
				}
				if calls <= tt.conflicts {
					// Another transaction commits a change to what this one read.
					if err := s.Update(func(tx engine.Tx) error { return tx.SetCounter(n + 100) }); err != nil {
						return err
					}
				}
				return tx.SetCounter(n + 1)
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Update = %v, want %v", err, tt.wantErr)
			}
			if calls != tt.wantCalls {
				t.Errorf("fn ran %d times, want %d", calls, tt.wantCalls)
			}
			s.View(func(tx engine.Tx) error {
				if n, _ := tx.Counter(); n != tt.wantCount {
					t.Errorf("counter = %d, want %d", n, tt.wantCount)
				}
				return nil
			})
		})
	}
}

func TestStore_TooBigTransactionFails(t *testing.T) {
	t.Parallel()
	s := openMemory(t)
	big := bytes.Repeat([]byte("x"), 512<<10)
	err := s.Update(func(tx engine.Tx) error {
		for i := range 20 {
			a := newActivity("wf", fmt.Sprint(i), scheduled, 0, int64(i))
			a.Input = big
			if err := tx.PutActivity(a); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, badgerdb.ErrTxnTooBig) {
		t.Fatalf("Update of 10 MiB = %v, want ErrTxnTooBig", err)
	}
	s.View(func(tx engine.Tx) error {
		if as, _ := tx.Activities("wf"); len(as) != 0 {
			t.Errorf("a failed big transaction left %d activities", len(as))
		}
		return nil
	})
}

func TestStore_ClosedStoreRefusesWork(t *testing.T) {
	t.Parallel()
	s := openDisk(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	noop := func(engine.Tx) error { return nil }
	for name, err := range map[string]error{"Update": s.Update(noop), "View": s.View(noop), "Sync": s.Sync()} {
		if !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close = %v, want engine.ErrClosed", name, err)
		}
	}
}

// TestStore_ConcurrentUpdatesAndSyncs runs writers that each commit their own
// records, bump the shared counter and Sync, as the engine does. No update may
// be lost: the counter equals the number of successful updates.
func TestStore_ConcurrentUpdatesAndSyncs(t *testing.T) {
	t.Parallel()
	s := openDisk(t)
	const writers, each = 8, 25
	var (
		mu        sync.Mutex
		succeeded int64
		wg        sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := s.Update(func(tx engine.Tx) error {
					n, err := tx.Counter()
					if err != nil {
						return err
					}
					a := newActivity(fmt.Sprintf("wf-%d", w), fmt.Sprint(i), scheduled, time.Duration(i)*time.Second, n)
					if err := tx.PutActivity(a); err != nil {
						return err
					}
					return tx.SetCounter(n + 1)
				})
				if errors.Is(err, badgerdb.ErrConflict) {
					continue // bounded retries ran out under contention
				}
				if err != nil {
					t.Errorf("update: %v", err)
					return
				}
				if err := s.Sync(); err != nil {
					t.Errorf("sync: %v", err)
					return
				}
				mu.Lock()
				succeeded++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s = reopenDisk(t, s)
	s.View(func(tx engine.Tx) error {
		n, err := tx.Counter()
		if err != nil || n != succeeded {
			t.Errorf("counter = %d, %v; want %d successful updates", n, err, succeeded)
		}
		count := 0
		tx.ScanActivities(func(*durablev1.ActivityRecord) bool { count++; return true })
		if int64(count) != succeeded {
			t.Errorf("%d activities, want %d", count, succeeded)
		}
		return nil
	})
	checkIndexes(t, s.(*Store))
}
