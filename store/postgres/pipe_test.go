package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func workflowRecord(id string) *durablev1.WorkflowRecord {
	return &durablev1.WorkflowRecord{Info: &durablev1.WorkflowInfo{WorkflowId: id, TaskQueue: "q"}}
}

// trips returns the round trips fn's transaction took.
func trips(t *testing.T, s *Store, fn func(engine.Tx) error) int64 {
	t.Helper()
	before := s.RoundTrips()
	if err := s.Update(fn); err != nil {
		t.Fatal(err)
	}
	return s.RoundTrips() - before
}

func TestUpdate_WritesGoWithTheNextReadAndTheCommit(t *testing.T) {
	t.Parallel()
	s := open(t, testpg.Database(t))
	// Writes alone: begin, writes and commit in one round trip.
	n := trips(t, s, func(tx engine.Tx) error {
		if err := tx.PutWorkflow(workflowRecord("a")); err != nil {
			return err
		}
		return tx.AppendEvents("a", []*durablev1.HistoryEvent{{EventId: 1}, {EventId: 2}})
	})
	if n != 1 {
		t.Errorf("a transaction that only writes took %d round trips, want 1", n)
	}
	// A read after writes sees them, in one round trip with them; a record
	// read or written before is not read again.
	n = trips(t, s, func(tx engine.Tx) error {
		if err := tx.PutWorkflow(workflowRecord("b")); err != nil {
			return err
		}
		h, err := tx.History("a")
		if err != nil || len(h) != 2 {
			t.Errorf("history of a: %d events, %v; want 2", len(h), err)
		}
		for range 3 {
			if _, err := tx.GetWorkflow("b"); err != nil {
				t.Errorf("workflow b, written earlier in the transaction: %v", err)
			}
			if _, err := tx.GetWorkflow("a"); err != nil {
				t.Errorf("workflow a: %v", err)
			}
			if _, err := tx.GetWorkflow("c"); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("workflow c: %v, want not found", err)
			}
		}
		return nil
	})
	if n != 4 { // history, a, c, commit
		t.Errorf("the transaction took %d round trips, want 4", n)
	}
	// A transaction that reads nothing from the database and writes
	// nothing sends nothing.
	if n := trips(t, s, func(engine.Tx) error { return nil }); n != 0 {
		t.Errorf("an empty transaction took %d round trips, want 0", n)
	}
}

func TestUpdate_AWriteTheDatabaseRefusesFailsTheWholeTransaction(t *testing.T) {
	t.Parallel()
	s := open(t, testpg.Database(t))
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `
		CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.workflow_id = 'refused'::bytea THEN RAISE EXCEPTION 'refused by the test'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON workflows FOR EACH ROW EXECUTE FUNCTION refuse()`)
	if err != nil {
		t.Fatal(err)
	}
	for _, read := range []bool{true, false} {
		err := s.Update(func(tx engine.Tx) error {
			if err := tx.PutWorkflow(workflowRecord("kept")); err != nil {
				return err
			}
			if err := tx.PutWorkflow(workflowRecord("refused")); err != nil {
				return err
			}
			if read {
				// The refusal comes back with the read it travelled with.
				_, err := tx.GetWorkflow("other")
				return err
			}
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), "refused by the test") {
			t.Fatalf("read %v: Update returned %v, want the refusal", read, err)
		}
		// The two rows went in one statement, which names both writes.
		if !strings.Contains(err.Error(), `put workflow "refused"`) {
			t.Errorf("read %v: %v does not name the refused write", read, err)
		}
		err = s.View(func(tx engine.Tx) error {
			_, err := tx.GetWorkflow("kept")
			return err
		})
		if !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("read %v: the write before the refused one: %v, want not found", read, err)
		}
	}
	// The connections are usable after it.
	if n := trips(t, s, func(tx engine.Tx) error { return tx.PutWorkflow(workflowRecord("later")) }); n != 1 {
		t.Errorf("a later write took %d round trips, want 1", n)
	}
}

func TestUseActivityID_ManyOfOneWorkflowInOneTransactionAskTwice(t *testing.T) {
	t.Parallel()
	s := open(t, testpg.Database(t))
	activity := func(wf, id string) *durablev1.ActivityRecord {
		return &durablev1.ActivityRecord{Info: &durablev1.PendingActivity{WorkflowId: wf, ActivityId: id, TaskQueue: "q",
			ActivityType: "T", State: durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED}}
	}
	trips(t, s, func(tx engine.Tx) error {
		if _, err := tx.UseActivityID("w", "old"); err != nil {
			return err
		}
		return tx.PutActivity(activity("w", "old"))
	})
	n := trips(t, s, func(tx engine.Tx) error {
		for i := range 20 {
			id := fmt.Sprintf("new-%d", i)
			used, err := tx.UseActivityID("w", id)
			if err != nil || used {
				t.Errorf("%s: used %v, %v; want a new id", id, used, err)
			}
			if _, err := tx.GetActivity("w", id); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("activity %s: %v, want not found", id, err)
			}
			if err := tx.PutActivity(activity("w", id)); err != nil {
				return err
			}
		}
		for _, id := range []string{"old", "new-3"} {
			if used, err := tx.UseActivityID("w", id); err != nil || !used {
				t.Errorf("%s: used %v, %v; want used", id, used, err)
			}
			if _, err := tx.GetActivity("w", id); err != nil {
				t.Errorf("activity %s: %v", id, err)
			}
		}
		return nil
	})
	if n != 4 { // the first id with its activity, both lists, the activity old, the commit
		t.Errorf("the transaction took %d round trips, want 4", n)
	}
	err := s.View(func(tx engine.Tx) error {
		for i := range 20 {
			if _, err := tx.GetActivity("w", fmt.Sprintf("new-%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Errorf("after the commit: %v", err)
	}
	trips(t, s, func(tx engine.Tx) error {
		for _, id := range []string{"new-0", "new-19"} {
			if used, err := tx.UseActivityID("w", id); err != nil || !used {
				t.Errorf("%s in a later transaction: used %v, %v; want used", id, used, err)
			}
		}
		return nil
	})
}
