package postgres

import (
	"errors"
	"testing"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func activityRecord(wf, id string, state durablev1.ActivityState) *durablev1.ActivityRecord {
	return &durablev1.ActivityRecord{Info: &durablev1.PendingActivity{
		WorkflowId: wf, ActivityId: id, TaskQueue: "q", ActivityType: "t", State: state,
	}}
}

func TestPrefetch_ReadsManyRecordsInOneRoundTripAndKeepsTheMissingAsMissing(t *testing.T) {
	t.Parallel()
	s := open(t, testpg.Database(t))
	trips(t, s, func(tx engine.Tx) error {
		for _, w := range []string{"w1", "w2"} {
			if err := tx.PutWorkflow(workflowRecord(w)); err != nil {
				return err
			}
			if err := tx.PutActivity(activityRecord(w, "a", durablev1.ActivityState_ACTIVITY_STATE_STARTED)); err != nil {
				return err
			}
		}
		return tx.PutActivity(activityRecord("w2", "b", durablev1.ActivityState_ACTIVITY_STATE_STARTED))
	})
	keys := []engine.RecordKey{
		{WorkflowID: "w1", ActivityID: "a"}, {WorkflowID: "w1"},
		{WorkflowID: "w2", ActivityID: "a"}, {WorkflowID: "w2"}, {WorkflowID: "w2", ActivityID: "a"}, {WorkflowID: "w2", ActivityID: "b"},
		{WorkflowID: "w1", ActivityID: "gone"}, {WorkflowID: "w3"},
	}
	var reads int64
	n := trips(t, s, func(tx engine.Tx) error {
		if err := tx.(engine.Prefetcher).Prefetch(keys); err != nil {
			return err
		}
		before := s.RoundTrips()
		for _, w := range []string{"w1", "w2"} {
			if a, err := tx.GetActivity(w, "a"); err != nil || a.GetInfo().GetWorkflowId() != w {
				t.Errorf("activity %s/a: %v, %v", w, a, err)
			}
			if r, err := tx.GetWorkflow(w); err != nil || r.GetInfo().GetWorkflowId() != w {
				t.Errorf("workflow %s: %v, %v", w, r, err)
			}
		}
		if _, err := tx.GetActivity("w1", "gone"); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("activity w1/gone: %v, want not found", err)
		}
		if _, err := tx.GetWorkflow("w3"); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("workflow w3: %v, want not found", err)
		}
		reads = s.RoundTrips() - before
		// A prefetched activity written without being read moves its
		// count from where the database had it.
		return tx.PutActivity(activityRecord("w2", "b", durablev1.ActivityState_ACTIVITY_STATE_RETRYING))
	})
	if reads != 0 {
		t.Errorf("reads of prefetched records took %d round trips, want 0", reads)
	}
	if n != 2 {
		t.Errorf("a transaction that prefetched, read what it prefetched and wrote took %d round trips, want 2", n)
	}
	counts := countsByState(t, s)
	if counts[durablev1.ActivityState_ACTIVITY_STATE_STARTED] != 2 || counts[durablev1.ActivityState_ACTIVITY_STATE_RETRYING] != 1 {
		t.Errorf("counts after the write: %v, want two started and one retrying", counts)
	}
}

func TestPrefetch_LeavesAnIDTheStoreRefusesToTheRead(t *testing.T) {
	t.Parallel()
	s := open(t, testpg.Database(t))
	bad := string(make([]byte, maxPartLen+1))
	err := s.Update(func(tx engine.Tx) error {
		if err := tx.(engine.Prefetcher).Prefetch([]engine.RecordKey{{WorkflowID: bad, ActivityID: "a"}, {WorkflowID: "w"}}); err != nil {
			t.Errorf("prefetch with an id the store refuses: %v, want nil", err)
		}
		_, err := tx.GetActivity(bad, "a")
		return err
	})
	if err == nil || errors.Is(err, engine.ErrNotFound) {
		t.Errorf("reading an activity by an id the store refuses: %v, want the store's refusal", err)
	}
}

// An activity a transaction knows only from an id check (or a claim), both
// of which keep its record but not its count, and then writes without
// reading it, moves its count from where the database had it.
func TestPutActivity_AfterAnIDCheckMovesTheCountItHad(t *testing.T) {
	t.Parallel()
	s := open(t, testpg.Database(t))
	trips(t, s, func(tx engine.Tx) error {
		if err := tx.PutWorkflow(workflowRecord("w")); err != nil {
			return err
		}
		return tx.PutActivity(activityRecord("w", "a", durablev1.ActivityState_ACTIVITY_STATE_STARTED))
	})
	trips(t, s, func(tx engine.Tx) error {
		if used, err := tx.UseActivityID("w", "a"); err != nil {
			return err
		} else if used {
			t.Errorf("activity id w/a used before it was checked")
		}
		return tx.PutActivity(activityRecord("w", "a", durablev1.ActivityState_ACTIVITY_STATE_RETRYING))
	})
	counts := countsByState(t, s)
	if counts[durablev1.ActivityState_ACTIVITY_STATE_STARTED] != 0 || counts[durablev1.ActivityState_ACTIVITY_STATE_RETRYING] != 1 {
		t.Errorf("counts after the write: %v, want one retrying and none started", counts)
	}
}

// countsByState reads the activity counts of s, summed over queues.
func countsByState(t *testing.T, s *Store) map[durablev1.ActivityState]int64 {
	t.Helper()
	counts := map[durablev1.ActivityState]int64{}
	if err := s.View(func(v engine.Tx) error {
		_, err := v.(*tx).ActivityCounts(func(_ string, st durablev1.ActivityState, n int64) bool {
			counts[st] += n
			return true
		})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return counts
}
