package badger

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// runStoreSuite checks every engine.Tx method and every index rule against
// the stores open returns. Each case writes, then calls reopen (which for an
// on-disk store closes it and opens the same directory again), then reads, so
// the on-disk run checks recovery too. After each case the indexes must be
// exactly what the records imply.
func runStoreSuite(t *testing.T, open func(t *testing.T) engine.Store, reopen func(t *testing.T, s engine.Store) engine.Store) {
	cases := []struct {
		name string
		fn   func(h *harness)
	}{
		{"WorkflowRoundTrip", testWorkflowRoundTrip},
		{"ListWorkflowsPages", testListWorkflowsPages},
		{"HistoryInEventOrder", testHistoryInEventOrder},
		{"ActivitiesOfOneWorkflow", testActivitiesOfOneWorkflow},
		{"LatencyRecords", testLatencyRecords},
		{"Counter", testCounter},
		{"ActivityIDsAreNeverReleased", testActivityIDsAreNeverReleased},
		{"FailedUpdateWritesNothing", testFailedUpdateWritesNothing},
		{"UpdateReadsItsOwnWrites", testUpdateReadsItsOwnWrites},
		{"ActivityTransitionsMoveIndexEntries", testActivityTransitionsMoveIndexEntries},
		{"WorkflowTaskTransitionsMoveIndexEntries", testWorkflowTaskTransitionsMoveIndexEntries},
		{"QueuedOrderAndLimit", testQueuedOrderAndLimit},
		{"DueTimersOrderAndLimit", testDueTimersOrderAndLimit},
		{"UserTimers", testUserTimers},
		{"DeleteActivityRemovesIndexEntries", testDeleteActivityRemovesIndexEntries},
		{"DeadLettersCursor", testDeadLettersCursor},
		{"OversizedInputsAreInvalid", testOversizedInputsAreInvalid},
		{"AuditNewestFirstAndPaged", testAuditNewestFirstAndPaged},
		{"AuditDeleteBefore", testAuditDeleteBefore},
		{"LatencyHoursWindow", testLatencyHoursWindow},
		{"LatencyHoursTrim", testLatencyHoursTrim},
		{"PolicyOverrides", testPolicyOverrides},
		{"GetAudit", testGetAudit},
		{"OperationsNewestFirstAndPaged", testOperationsNewestFirstAndPaged},
		{"OperationItemsInOrder", testOperationItemsInOrder},
		{"StateIndexFollowsTheRecord", testStateIndexFollowsTheRecord},
		{"ActivitiesByStateRangesAndCursor", testActivitiesByStateRangesAndCursor},
		{"DeadLettersInSeeksTheTimeRange", testDeadLettersInSeeksTheTimeRange},
		{"FinishedActivitiesRoundTrip", testFinishedActivitiesRoundTrip},
		{"FinishedDeleteBefore", testFinishedDeleteBefore},
		{"WorkflowStatusIndexesFollowTheRecord", testWorkflowStatusIndexesFollowTheRecord},
		{"ClosedWorkflowsWindow", testClosedWorkflowsWindow},
		{"ActivityCountsFollowTheRecords", testActivityCountsFollowTheRecords},
		{"QueuedInSeeksEveryQueue", testQueuedInSeeksEveryQueue},
		{"TimersInRange", testTimersInRange},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := &harness{t: t, s: open(t), reopenFunc: reopen}
			c.fn(h)
			if s, ok := h.s.(*Store); ok {
				checkIndexes(t, s)
			}
		})
	}
}

// harness is what a suite case works with: the store under test and a way to
// end a write phase.
type harness struct {
	t          *testing.T
	s          engine.Store
	reopenFunc func(*testing.T, engine.Store) engine.Store
}

func (h *harness) update(fn func(tx engine.Tx) error) {
	h.t.Helper()
	if err := h.s.Update(fn); err != nil {
		h.t.Fatalf("update: %v", err)
	}
}

func (h *harness) view(fn func(tx engine.Tx) error) {
	h.t.Helper()
	if err := h.s.View(fn); err != nil {
		h.t.Fatalf("view: %v", err)
	}
}

// written ends a write phase: what follows must read what was recovered.
func (h *harness) written() {
	h.t.Helper()
	if err := h.s.Sync(); err != nil {
		h.t.Fatalf("sync: %v", err)
	}
	h.s = h.reopenFunc(h.t, h.s)
}

// queued renders a queue's first entries as "wf/act@due#seq".
func (h *harness) queued(kind engine.TaskKind, queue string, limit int) []string {
	h.t.Helper()
	var out []string
	h.view(func(tx engine.Tx) error {
		es, err := tx.Queued(kind, queue, limit)
		for _, e := range es {
			out = append(out, fmt.Sprintf("%s/%s@%v#%d", e.WorkflowID, e.ActivityID, e.Due.Sub(t0), e.Seq))
		}
		return err
	})
	return out
}

// timers renders the first timers as "kind:wf/id@due".
func (h *harness) timers(limit int) []string {
	h.t.Helper()
	var out []string
	h.view(func(tx engine.Tx) error {
		ts, err := tx.DueTimers(limit)
		for _, tm := range ts {
			out = append(out, fmt.Sprintf("%s:%s/%s@%v", timerKindName[tm.Kind], tm.WorkflowID, tm.ID, tm.Due.Sub(t0)))
		}
		return err
	})
	return out
}

// deadLetters renders every dead letter as "wf/act", oldest first.
func (h *harness) deadLetters() []string {
	h.t.Helper()
	var out []string
	h.view(func(tx engine.Tx) error {
		_, err := tx.DeadLetters(nil, func(a *durablev1.ActivityRecord) bool {
			out = append(out, a.GetInfo().GetWorkflowId()+"/"+a.GetInfo().GetActivityId())
			return true
		})
		return err
	})
	return out
}

var timerKindName = map[engine.TimerKind]string{
	engine.ActivityLeaseTimer:     "lease",
	engine.ScheduleToStartTimer:   "sts",
	engine.ScheduleToCloseTimer:   "stc",
	engine.WorkflowTaskLeaseTimer: "wtlease",
	engine.UserTimer:              "user",
}

// t0 is the base of every fixture time; renders show offsets from it.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }

const (
	scheduled    = durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED
	started      = durablev1.ActivityState_ACTIVITY_STATE_STARTED
	retrying     = durablev1.ActivityState_ACTIVITY_STATE_RETRYING
	deadLettered = durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
)

// newActivity returns an activity in queue "q" whose state's own time (next
// attempt, lease deadline or dead-lettered time) is t0+d.
func newActivity(wf, id string, state durablev1.ActivityState, d time.Duration, seq int64) *durablev1.ActivityRecord {
	in := &durablev1.PendingActivity{
		WorkflowId: wf, ActivityId: id, ActivityType: "Charge", TaskQueue: "q", State: state,
		Attempt: 1, MaxAttempts: 5, IdempotencyKey: wf + "/" + id,
	}
	switch state {
	case scheduled, retrying:
		in.NextAttemptTime = at(d)
	case started:
		in.LeaseDeadline = at(d)
	case deadLettered:
		in.DeadLetteredTime = at(d)
	}
	return &durablev1.ActivityRecord{Info: in, Input: []byte("input"), Seq: seq}
}

func newWorkflow(id string, wt durablev1.WorkflowTaskState, d time.Duration, seq int64) *durablev1.WorkflowRecord {
	w := &durablev1.WorkflowRecord{
		Info:    &durablev1.WorkflowInfo{WorkflowId: id, WorkflowType: "Order", TaskQueue: "q", StartTime: at(0)},
		Input:   []byte("order"),
		WtState: wt, WtSeq: seq, NextEventId: 3,
	}
	switch wt {
	case durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED:
		w.WtDue = at(d)
	case durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_STARTED:
		w.WtDeadline = at(d)
	}
	return w
}

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

func wantEqual(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func wantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("%s: err = %v, want engine.ErrNotFound", what, err)
	}
}

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
