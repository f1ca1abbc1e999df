package badger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestStore_OpenBackfillsTheStateIndex: activity records written before the
// state index and the activity counts existed (here: written raw, without
// them, in a directory that says nothing of its indexes) get their entries
// and their counts when the store opens, more than one batch of them, and
// the indexes are then exactly what the records imply.
func TestStore_OpenBackfillsTheStateIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	const n = backfillBatch + 500
	err := s.db.Update(func(txn *badgerdb.Txn) error {
		// A data directory of an older release says nothing of its indexes.
		if err := txn.Delete(indexVersionKey()); err != nil {
			return err
		}
		for i := range n {
			a := newActivity(fmt.Sprintf("wf-%04d", i), "1", retrying, time.Second, int64(i))
			v, err := proto.Marshal(a)
			if err != nil {
				return err
			}
			if err := txn.Set(activityKey(a.GetInfo().GetWorkflowId(), "1"), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(putActivities(newActivity("indexed", "1", deadLettered, time.Second, 0))); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir)
	count := func(state durablev1.ActivityState) int {
		var got int
		err := s.View(func(tx engine.Tx) error {
			_, err := tx.ActivitiesByState(engine.StateRange{State: state}, nil, func(*durablev1.ActivityRecord) bool {
				got++
				return true
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	counts := map[durablev1.ActivityState]int64{}
	err = s.View(func(tx engine.Tx) error {
		kept, err := tx.ActivityCounts(func(_ string, state durablev1.ActivityState, n int64) bool {
			counts[state] += n
			return true
		})
		if !kept && err == nil {
			t.Error("after reopening, the store says it keeps no activity counts")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts[retrying] != n || counts[deadLettered] != 1 || len(counts) != 2 {
		t.Errorf("after reopening, the activity counts are %v, want %d retrying and 1 dead-lettered", counts, n)
	}
	if got := count(retrying); got != n {
		t.Errorf("after reopening: %d retrying activities in the state index, want %d", got, n)
	}
	if got := count(deadLettered); got != 1 {
		t.Errorf("after reopening: %d dead letters in the state index, want 1", got)
	}
	// The raw records have no queue or timer entries either; only the
	// state index is backfilled, so compare just that.
	var stateKeys int
	err = s.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixActivityState}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			stateKeys++
		}
		return nil
	})
	if err != nil || stateKeys != n+1 {
		t.Errorf("%d state index entries (%v), want %d", stateKeys, err, n+1)
	}
}

// TestStore_OpenBackfillsTheWorkflowIndexes: workflow records written before
// the running and closed indexes existed (here: written raw, without them)
// get their entries when the store opens, more than one batch of them, and
// a workflow without a status gets none.
func TestStore_OpenBackfillsTheWorkflowIndexes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	const n = backfillBatch + 300
	err := s.db.Update(func(txn *badgerdb.Txn) error {
		if err := txn.Delete(indexVersionKey()); err != nil {
			return err
		}
		put := func(w *durablev1.WorkflowRecord) error {
			v, err := proto.Marshal(w)
			if err != nil {
				return err
			}
			return txn.Set(workflowKey(w.GetInfo().GetWorkflowId()), v)
		}
		for i := range n {
			st := durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED
			if i%2 == 0 {
				st = durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
			}
			if err := put(workflowWithStatus(fmt.Sprintf("wf-%04d", i), st, time.Duration(i)*time.Second)); err != nil {
				return err
			}
		}
		return put(newWorkflow("no-status", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, 0, 0))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openDir(t, dir)
	var running, closed int
	var newest string
	err = s.View(func(tx engine.Tx) error {
		if err := tx.RunningWorkflows(func(*durablev1.WorkflowRecord) bool { running++; return true }); err != nil {
			return err
		}
		return tx.ClosedWorkflows(time.Time{}, func(w *durablev1.WorkflowRecord) bool {
			if closed == 0 {
				newest = w.GetInfo().GetWorkflowId()
			}
			closed++
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if running != (n+1)/2 || closed != n/2 {
		t.Errorf("after reopening: %d running and %d closed in the indexes, want %d and %d", running, closed, (n+1)/2, n/2)
	}
	if want := fmt.Sprintf("wf-%04d", n-1); newest != want {
		t.Errorf("newest closed = %q, want %q (the last to close)", newest, want)
	}
	// The raw records have no workflow task, so every index entry they
	// imply is a status entry: all of them must now be there.
	checkIndexes(t, s)
}

// TestStore_OpenBackfillsTheActivityIDMarkers: a data directory written
// before the activity-id markers (here: histories written without them, in
// a directory that says it holds only the indexes of version 1) gets a
// marker for every activity id its running workflows scheduled, more than
// one batch of them, so that no id can be scheduled a second time; on a
// directory that held everything, UseActivityID had called them unused.
func TestStore_OpenBackfillsTheActivityIDMarkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	const workflows, perWorkflow = 3, backfillBatch/2 + 10
	mustUpdate(t, s, func(tx engine.Tx) error {
		for w := range workflows {
			id := fmt.Sprint("old-", w)
			if err := tx.PutWorkflow(workflowWithStatus(id, durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING, 0)); err != nil {
				return err
			}
			var events []*durablev1.HistoryEvent
			for i := range perWorkflow {
				events = append(events,
					&durablev1.HistoryEvent{EventId: int64(2*i + 1), Type: durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, ActivityId: fmt.Sprint(i)},
					&durablev1.HistoryEvent{EventId: int64(2*i + 2), Type: durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED, ActivityId: fmt.Sprint(i)})
			}
			if err := tx.AppendEvents(id, events); err != nil {
				return err
			}
		}
		return nil
	})
	err := s.db.Update(func(txn *badgerdb.Txn) error {
		return txn.Set(indexVersionKey(), binary.BigEndian.AppendUint64(nil, 1))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	s, err = Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if want := fmt.Sprintf("workflows=%d ids=%d", workflows, workflows*perWorkflow); !strings.Contains(logged.String(), want) {
		t.Errorf("the start logged %q, want a line with %q", logged.String(), want)
	}
	mustUpdate(t, s, func(tx engine.Tx) error {
		for w := range workflows {
			id := fmt.Sprint("old-", w)
			for _, a := range []string{"0", fmt.Sprint(perWorkflow - 1)} {
				if used, err := tx.UseActivityID(id, a); err != nil || !used {
					t.Errorf("activity id %s/%s after reopening: used %v, %v; want used", id, a, used, err)
				}
			}
			if used, err := tx.UseActivityID(id, "new"); err != nil || used {
				t.Errorf("activity id %s/new: used %v, %v; want unused", id, used, err)
			}
		}
		return nil
	})
	mustView(t, s, func(view engine.Tx) error {
		v, err := view.(*tx).indexVersion()
		if err == nil && v != indexVersion {
			t.Errorf("index version %d after reopening, want %d", v, indexVersion)
		}
		return err
	})
}
