package badger

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Tests of what a transaction remembers of the records it read and wrote
// (known.go): every case ends with checkIndexes, which compares the index
// entries and counts on disk with those the records imply.

var errRollBack = errors.New("roll back")

func TestTx_ActivityWrittenSeveralTimesInOneTransactionKeepsOnlyItsLastEntries(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	mustUpdate(t, s, putActivities(newActivity("w", "1", scheduled, time.Second, 1)))
	mustUpdate(t, s, func(tx engine.Tx) error {
		a, err := tx.GetActivity("w", "1")
		if err != nil {
			return err
		}
		a.Info.State, a.Info.NextAttemptTime, a.Info.LeaseDeadline = started, nil, at(time.Minute)
		if err := tx.PutActivity(a); err != nil {
			return err
		}
		a.Info.State, a.Info.LeaseDeadline, a.Info.NextAttemptTime = retrying, nil, at(time.Hour)
		a.Seq = 2
		if err := tx.PutActivity(a); err != nil {
			return err
		}
		// Written without a read in this transaction.
		return tx.PutActivity(newActivity("w", "1", deadLettered, 2*time.Hour, 3))
	})
	checkIndexes(t, s)
	s = reopenDisk(t, s).(*Store)
	checkIndexes(t, s)
	mustView(t, s, func(tx engine.Tx) error {
		a, err := tx.GetActivity("w", "1")
		if err == nil && a.GetInfo().GetState() != deadLettered {
			t.Errorf("state %v, want dead-lettered", a.GetInfo().GetState())
		}
		return err
	})
}

func TestTx_ActivityReadWrittenAndDeletedInOneTransactionLeavesNothing(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	mustUpdate(t, s, putActivities(newActivity("w", "1", started, time.Second, 1), newActivity("w", "2", scheduled, time.Second, 2)))
	mustUpdate(t, s, func(tx engine.Tx) error {
		as, err := tx.Activities("w")
		if err != nil {
			return err
		}
		for _, a := range as {
			a.Info.State, a.Info.LeaseDeadline, a.Info.NextAttemptTime = retrying, nil, at(time.Hour)
			if err := tx.PutActivity(a); err != nil {
				return err
			}
			if err := tx.DeleteActivity("w", a.GetInfo().GetActivityId()); err != nil {
				return err
			}
		}
		// Deleted in this transaction: deleting again is not found,
		// writing again counts it again from nothing.
		wantNotFound(t, "second delete", tx.DeleteActivity("w", "1"))
		return tx.PutActivity(newActivity("w", "1", scheduled, time.Minute, 3))
	})
	checkIndexes(t, s)
	mustView(t, s, func(tx engine.Tx) error {
		_, err := tx.GetActivity("w", "2")
		wantNotFound(t, "deleted activity", err)
		return nil
	})
}

func TestTx_NewActivityReadAsMissingIsCountedOnce(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	mustUpdate(t, s, func(tx engine.Tx) error {
		_, err := tx.GetActivity("w", "1")
		wantNotFound(t, "new activity", err)
		a := newActivity("w", "1", scheduled, time.Second, 1)
		if err := tx.PutActivity(a); err != nil {
			return err
		}
		a.Info.State, a.Info.NextAttemptTime, a.Info.LeaseDeadline = started, nil, at(time.Minute)
		return tx.PutActivity(a)
	})
	checkIndexes(t, s)
}

func TestTx_FailedTransactionLeavesNothingRememberedForTheNext(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	mustUpdate(t, s, putActivities(newActivity("w", "1", scheduled, time.Second, 1)))
	mustUpdate(t, s, func(tx engine.Tx) error {
		return tx.PutWorkflow(newWorkflow("w", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED, time.Second, 2))
	})
	err := s.Update(func(tx engine.Tx) error {
		a, err := tx.GetActivity("w", "1")
		if err != nil {
			return err
		}
		a.Info.State, a.Info.NextAttemptTime, a.Info.LeaseDeadline = started, nil, at(time.Minute)
		if err := tx.PutActivity(a); err != nil {
			return err
		}
		if err := tx.PutWorkflow(newWorkflow("w", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_STARTED, time.Minute, 3)); err != nil {
			return err
		}
		return errRollBack
	})
	if !errors.Is(err, errRollBack) {
		t.Fatalf("update: %v, want the transition's error", err)
	}
	checkIndexes(t, s)
	// The next transaction writes without reading: it must find the
	// entries of the records as stored, not of the rolled-back writes.
	mustUpdate(t, s, func(tx engine.Tx) error {
		if err := tx.PutActivity(newActivity("w", "1", retrying, time.Hour, 4)); err != nil {
			return err
		}
		return tx.PutWorkflow(newWorkflow("w", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, 0, 5))
	})
	checkIndexes(t, s)
}

func TestTx_WriteThatFailsIsReadAgainByTheNextWrite(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	mustUpdate(t, s, putActivities(newActivity("w", "1", scheduled, time.Second, 1)))
	mustUpdate(t, s, func(tx engine.Tx) error {
		a, err := tx.GetActivity("w", "1")
		if err != nil {
			return err
		}
		big := newActivity("w", "1", started, time.Minute, 2)
		big.Input = []byte(strings.Repeat("x", s.maxRecord+1))
		var invalid *engine.InvalidError
		if err := tx.PutActivity(big); !errors.As(err, &invalid) {
			t.Errorf("put of a record over the limit: %v, want an InvalidError", err)
		}
		a.Info.State, a.Info.NextAttemptTime, a.Info.LeaseDeadline = started, nil, at(time.Minute)
		return tx.PutActivity(a)
	})
	checkIndexes(t, s)
}

func TestTx_WorkflowWrittenSeveralTimesInOneTransactionKeepsOnlyItsLastEntries(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	mustUpdate(t, s, func(tx engine.Tx) error {
		return tx.PutWorkflow(newWorkflow("w", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED, time.Second, 1))
	})
	mustUpdate(t, s, func(tx engine.Tx) error {
		w, err := tx.GetWorkflow("w")
		if err != nil {
			return err
		}
		w.WtState, w.WtDue, w.WtDeadline = durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_STARTED, nil, at(time.Minute)
		w.Info.Status = durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
		if err := tx.PutWorkflow(w); err != nil {
			return err
		}
		w.WtState, w.WtDeadline = durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, nil
		w.Info.Status, w.Info.CloseTime = durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED, at(time.Hour)
		if err := tx.PutWorkflow(w); err != nil {
			return err
		}
		// A new workflow read as missing first, then written twice.
		if _, err := tx.GetWorkflow("v"); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("new workflow: %v, want not found", err)
		}
		v := newWorkflow("v", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED, time.Second, 2)
		v.Info.Status = durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
		if err := tx.PutWorkflow(v); err != nil {
			return err
		}
		v.WtState, v.WtDue = durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, nil
		return tx.PutWorkflow(v)
	})
	checkIndexes(t, s)
	s = reopenDisk(t, s).(*Store)
	checkIndexes(t, s)
}

func at(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("%s: err = %v, want engine.ErrNotFound", what, err)
	}
}

func mustUpdate(t *testing.T, s engine.Store, fn func(engine.Tx) error) {
	t.Helper()
	if err := s.Update(fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

func mustView(t *testing.T, s engine.Store, fn func(engine.Tx) error) {
	t.Helper()
	if err := s.View(fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

// Records are decoded inside Badger's Item.Value, from a buffer it reuses for
// the next item of an iteration and frees with the transaction: what they
// hold must be their own copy.
func TestTx_RecordsReadKeepTheirBytesAfterTheBufferMovesOn(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	payload := func(i int) []byte { return []byte(strings.Repeat(string(rune('a'+i%26)), 100+i)) }
	var events []*durablev1.HistoryEvent
	for i := range 200 {
		events = append(events, &durablev1.HistoryEvent{EventId: int64(i + 1), ActivityId: fmt.Sprint("a", i), Result: payload(i)})
	}
	mustUpdate(t, s, func(tx engine.Tx) error { return tx.AppendEvents("w", events) })
	var got []*durablev1.HistoryEvent
	var one *durablev1.ActivityRecord
	mustUpdate(t, s, putActivities(newActivity("w", "1", scheduled, time.Second, 1)))
	mustView(t, s, func(tx engine.Tx) error {
		var err error
		if got, err = tx.History("w"); err != nil {
			return err
		}
		one, err = tx.GetActivity("w", "1")
		return err
	})
	// Other reads and writes reuse what Badger lent.
	mustUpdate(t, s, func(tx engine.Tx) error {
		for i := range events {
			events[i].Result = bytes.Repeat([]byte{'z'}, len(events[i].GetResult()))
		}
		return tx.AppendEvents("w", events)
	})
	mustView(t, s, func(tx engine.Tx) error { _, err := tx.History("w"); return err })
	if len(got) != 200 {
		t.Fatalf("read %d events, want 200", len(got))
	}
	for i, ev := range got {
		if !bytes.Equal(ev.GetResult(), payload(i)) || ev.GetActivityId() != fmt.Sprint("a", i) {
			t.Fatalf("event %d holds %q / %q after the read moved on", i+1, ev.GetActivityId(), ev.GetResult())
		}
	}
	if string(one.GetInput()) != "input" || one.GetInfo().GetIdempotencyKey() != "w/1" {
		t.Errorf("activity holds %q / %q after its transaction ended", one.GetInput(), one.GetInfo().GetIdempotencyKey())
	}
}

// An activity record exists only under an activity id that was used, so an
// id UseActivityID finds unused tells the transaction the record is missing:
// the schedule that follows neither looks it up nor reads it to replace its
// index entries. The record put here behind UseActivityID's back (no
// engine path writes one) would be found by a lookup; it is not.
func TestTx_AnActivityUnderAnUnusedIDIsNotLookedUp(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	mustUpdate(t, s, func(tx engine.Tx) error {
		return tx.PutActivity(newActivity("w", "hidden", scheduled, time.Second, 1))
	})
	mustUpdate(t, s, func(tx engine.Tx) error {
		used, err := tx.UseActivityID("w", "hidden")
		if err != nil || used {
			t.Fatalf("UseActivityID = %v, %v; want unused", used, err)
		}
		_, err = tx.GetActivity("w", "hidden")
		wantNotFound(t, "activity under an id just found unused", err)
		used, err = tx.UseActivityID("w", "hidden")
		if err != nil || !used {
			t.Fatalf("UseActivityID a second time = %v, %v; want used", used, err)
		}
		return nil
	})
	// A read-only view knows nothing and reads the store.
	err := s.View(func(tx engine.Tx) error {
		_, err := tx.GetActivity("w", "hidden")
		return err
	})
	if err != nil {
		t.Fatalf("a view reads the record the store holds: %v", err)
	}
}
