package badger

import (
	"errors"
	"maps"
	"testing"

	badgerdb "github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/store/storetest"
)

// TestStoreConformance runs the store suite on a store on disk, reopened
// at the end of every write phase so each case checks recovery too, and on
// an in-memory store (the one the daemon's in-process tests use). After
// each case the indexes must be exactly what the records imply.
func TestStoreConformance(t *testing.T) {
	t.Parallel()
	t.Run("badger", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) storetest.Opened {
			return storetest.Opened{
				Store: openDisk(t), ReopenFunc: reopenDisk, CheckFunc: checkStore,
				MaxIDLen: maxPartLen, MaxRecordSize: maxRecordSizeOnDisk,
			}
		})
	})
	t.Run("badger-in-memory", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) storetest.Opened {
			return storetest.Opened{
				Store: openMemory(t), CheckFunc: checkStore,
				MaxIDLen: maxPartLen, MaxRecordSize: maxRecordSize, NoSync: true,
			}
		})
	})
}

// The suite's fixtures, for the tests of what only this store has.
var (
	newActivity        = storetest.NewActivity
	newWorkflow        = storetest.NewWorkflow
	workflowWithStatus = storetest.WorkflowWithStatus
	t0                 = storetest.T0
)

const (
	scheduled    = durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED
	started      = durablev1.ActivityState_ACTIVITY_STATE_STARTED
	retrying     = durablev1.ActivityState_ACTIVITY_STATE_RETRYING
	deadLettered = durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
)

func putActivities(as ...*durablev1.ActivityRecord) func(engine.Tx) error {
	return func(tx engine.Tx) error {
		for _, a := range as {
			if err := tx.PutActivity(a); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestCursors_KeysOfAnotherIndexAreInvalid hands each paged list a key of
// another index as its cursor: a store that only checked a cursor's length
// would read from the wrong index.
func TestCursors_KeysOfAnotherIndexAreInvalid(t *testing.T) {
	t.Parallel()
	s := openMemory(t)
	err := s.View(func(tx engine.Tx) error {
		for name, list := range map[string]func() error{
			"AuditRecords(workflow key)": func() error {
				_, err := tx.AuditRecords(workflowKey("not-a-cursor"), func(*durablev1.AuditRecord) bool { return true })
				return err
			},
			"Operations(audit key)": func() error {
				_, err := tx.Operations(auditKey(t0, 1), func(*durablev1.OperationRecord) bool { return true })
				return err
			},
			"ActivitiesByState(dead-letter key)": func() error {
				_, err := tx.ActivitiesByState(engine.StateRange{}, deadLetterKey(t0, "w", "a"), func(*durablev1.ActivityRecord) bool { return true })
				return err
			},
		} {
			if err := list(); !errors.As(err, new(*engine.InvalidError)) {
				t.Errorf("%s: err = %v, want *engine.InvalidError", name, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOperationItems_AListWithAHoleIsCorrupt: the suite checks that such a
// list is an error; here, that it is this store's corruption error.
func TestOperationItems_AListWithAHoleIsCorrupt(t *testing.T) {
	t.Parallel()
	s := openMemory(t)
	refs := []*durablev1.ActivityRef{{WorkflowId: "a", ActivityId: "1"}, {WorkflowId: "b", ActivityId: "1"}}
	err := s.Update(func(tx engine.Tx) error {
		if err := tx.PutOperationItems(9, 0, refs); err != nil {
			return err
		}
		_, err := tx.DeleteOperationItems(9, 1)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.View(func(tx engine.Tx) error {
		if _, err := tx.OperationItems(9, 0, 2); !errors.Is(err, errCorrupt) {
			t.Errorf("a list missing its first item: err = %v, want errCorrupt", err)
		}
		return nil
	})
}

// checkStore is the suite's CheckFunc: checkIndexes on an open store.
func checkStore(t *testing.T, s engine.Store) { checkIndexes(t, s.(*Store)) }

// checkIndexes compares every index entry in s with the entries its records
// imply: nothing missing, nothing left over; and the activity counts with
// the records.
func checkIndexes(t *testing.T, s *Store) {
	t.Helper()
	want := map[string]bool{}
	got := map[string]bool{}
	wantCounts := map[string]int64{}
	gotCounts := map[string]int64{}
	err := s.db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.KeyCopy(nil)
			var keys [][]byte
			var err error
			switch k[0] {
			case prefixQueue, prefixTimerIndex, prefixDeadLetter, prefixActivityState, prefixFinishedTime,
				prefixWorkflowClosed, prefixWorkflowRunning:
				got[string(k)] = true
				continue
			case prefixActivityCount:
				err = item.Value(func(v []byte) error {
					var err error
					gotCounts[string(k)], err = decodeCounter(v)
					return err
				})
			case prefixFinished:
				f := new(durablev1.FinishedActivity)
				err = item.Value(func(v []byte) error { return proto.Unmarshal(v, f) })
				in := f.GetActivity()
				keys = [][]byte{finishedTimeKey(f.GetFinishedTime().AsTime(), in.GetWorkflowId(), in.GetActivityId())}
			case prefixWorkflow:
				w := new(durablev1.WorkflowRecord)
				err = item.Value(func(v []byte) error { return proto.Unmarshal(v, w) })
				keys = workflowIndexKeys(w)
			case prefixActivity:
				a := new(durablev1.ActivityRecord)
				err = item.Value(func(v []byte) error { return proto.Unmarshal(v, a) })
				keys = activityIndexKeys(a)
				if ck := countKeyOf(a); ck != nil {
					wantCounts[string(ck)]++
				}
			case prefixTimer:
				r := new(durablev1.TimerRecord)
				err = item.Value(func(v []byte) error { return proto.Unmarshal(v, r) })
				keys = [][]byte{timerIndexKey(engine.UserTimerOf(r))}
			}
			if err != nil {
				return err
			}
			for _, ik := range keys {
				want[string(ik)] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read indexes: %v", err)
	}
	for k := range want {
		if !got[k] {
			t.Errorf("index entry %x missing", []byte(k))
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("index entry %x left over", []byte(k))
		}
	}
	if !maps.Equal(gotCounts, wantCounts) {
		t.Errorf("activity counts %v, the records imply %v", gotCounts, wantCounts)
	}
}
