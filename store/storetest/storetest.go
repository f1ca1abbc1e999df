// Package storetest is the conformance suite of engine.Store: every store
// the engine runs on passes the same cases, so the engine's contract cannot
// differ between stores. A store's tests call Run with an Opener:
//
//	func TestStoreConformance(t *testing.T) {
//		t.Run("badger", func(t *testing.T) { storetest.Run(t, openOnDisk) })
//	}
//
// The cases cover records, the indexes a store derives from them (queues,
// timers, dead letters, states, counts, workflow status), paging cursors,
// transactions that fail whole, and recovery: each case writes, ends its
// write phase (a Sync and, where the store has one, a reopen on the same
// state), then reads. Checks that depend on how a store lays out its data
// run after every case through Opened.CheckFunc. Production code must not
// import this package.
package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Opener opens a new, empty store for one case; it runs once per case, and
// the store must be closed when t ends.
type Opener func(t *testing.T) Opened

// Opened is a store under test with what the suite needs to know about it.
type Opened struct {
	Store engine.Store
	// ReopenFunc closes s and opens the same state again, as a restart
	// would; the suite has synced s before. Nil for a store that cannot be
	// reopened (in memory): the suite goes on with the same store.
	ReopenFunc func(t *testing.T, s engine.Store) engine.Store
	// CheckFunc, when set, runs after every case on the store as the case
	// left it, for the store's own invariants: for example, that its index
	// entries are exactly those its records imply.
	CheckFunc func(t *testing.T, s engine.Store)
	// MaxIDLen is the longest id, queue name or activity type the store
	// takes, and MaxRecordSize the largest record; a longer one is an
	// *engine.InvalidError. Zero skips the checks of that bound.
	MaxIDLen, MaxRecordSize int
	// NoSync says the store keeps nothing on disk (in memory, or with
	// syncs turned off), so its Sync does nothing, even after Close.
	NoSync bool
}

// area is one group of cases, run as a subtest of its own.
type area struct {
	name  string
	cases []suiteCase
}

type suiteCase struct {
	name string
	fn   func(h *harness)
}

var areas = []area{
	{"Records", []suiteCase{
		{"WorkflowRoundTrip", testWorkflowRoundTrip},
		{"ListWorkflowsPages", testListWorkflowsPages},
		{"HistoryInEventOrder", testHistoryInEventOrder},
		{"ActivitiesOfOneWorkflow", testActivitiesOfOneWorkflow},
		{"LatencyRecords", testLatencyRecords},
		{"Counter", testCounter},
		{"ActivityIDsAreNeverReleased", testActivityIDsAreNeverReleased},
		{"OversizedInputsAreInvalid", testOversizedInputsAreInvalid},
	}},
	{"Transactions", []suiteCase{
		{"FailedUpdateWritesNothing", testFailedUpdateWritesNothing},
		{"UpdateReadsItsOwnWrites", testUpdateReadsItsOwnWrites},
		{"ReopenRecoversEverything", testReopenRecoversEverything},
		{"ClosedStoreRefusesWork", testClosedStoreRefusesWork},
		{"ScansKeepTheirViewWhileOthersCommit", testScansKeepTheirViewWhileOthersCommit},
	}},
	{"Indexes", []suiteCase{
		{"ActivityTransitionsMoveIndexEntries", testActivityTransitionsMoveIndexEntries},
		{"WorkflowTaskTransitionsMoveIndexEntries", testWorkflowTaskTransitionsMoveIndexEntries},
		{"QueuedOrderAndLimit", testQueuedOrderAndLimit},
		{"DueTimersOrderAndLimit", testDueTimersOrderAndLimit},
		{"UserTimers", testUserTimers},
		{"DeleteActivityRemovesIndexEntries", testDeleteActivityRemovesIndexEntries},
		{"DeadLettersCursor", testDeadLettersCursor},
	}},
	{"Window", []suiteCase{
		{"ActivityCountsFollowTheRecords", testActivityCountsFollowTheRecords},
		{"QueuedInSeeksEveryQueue", testQueuedInSeeksEveryQueue},
		{"TimersInRange", testTimersInRange},
	}},
	{"Workflows", []suiteCase{
		{"WorkflowStatusIndexesFollowTheRecord", testWorkflowStatusIndexesFollowTheRecord},
		{"ClosedWorkflowsWindow", testClosedWorkflowsWindow},
	}},
	{"Trail", []suiteCase{
		{"StateIndexFollowsTheRecord", testStateIndexFollowsTheRecord},
		{"ActivitiesByStateRangesAndCursor", testActivitiesByStateRangesAndCursor},
		{"DeadLettersInSeeksTheTimeRange", testDeadLettersInSeeksTheTimeRange},
		{"FinishedActivitiesRoundTrip", testFinishedActivitiesRoundTrip},
		{"FinishedDeleteBefore", testFinishedDeleteBefore},
	}},
	{"Latency", []suiteCase{
		{"LatencyHoursWindow", testLatencyHoursWindow},
		{"LatencyHoursTrim", testLatencyHoursTrim},
		{"PolicyOverrides", testPolicyOverrides},
	}},
	{"Audit", []suiteCase{
		{"AuditNewestFirstAndPaged", testAuditNewestFirstAndPaged},
		{"AuditDeleteBefore", testAuditDeleteBefore},
		{"GetAudit", testGetAudit},
	}},
	{"Operations", []suiteCase{
		{"OperationsNewestFirstAndPaged", testOperationsNewestFirstAndPaged},
		{"OperationItemsInOrder", testOperationItemsInOrder},
	}},
}

// Run runs every case of the suite, in parallel, each on a store of its own
// from open, as subtests grouped by area (Records, Transactions, Indexes,
// ...).
func Run(t *testing.T, open Opener) {
	for _, a := range areas {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range a.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					o := open(t)
					h := &harness{t: t, s: o.Store, opened: o}
					c.fn(h)
					if o.CheckFunc != nil && !h.closed {
						o.CheckFunc(t, h.s)
					}
				})
			}
		})
	}
}

// harness is what a suite case works with: the store under test and a way to
// end a write phase.
type harness struct {
	t      *testing.T
	s      engine.Store
	opened Opened
	closed bool // the case closed the store: there is nothing left to check
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
	if h.opened.ReopenFunc != nil {
		h.s = h.opened.ReopenFunc(h.t, h.s)
	}
}

// queued renders a queue's first entries as "wf/act@due#seq".
func (h *harness) queued(kind engine.TaskKind, queue string, limit int) []string {
	h.t.Helper()
	var out []string
	h.view(func(tx engine.Tx) error {
		es, err := tx.Queued(kind, queue, limit)
		for _, e := range es {
			out = append(out, fmt.Sprintf("%s/%s@%v#%d", e.WorkflowID, e.ActivityID, e.Due.Sub(T0), e.Seq))
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
			out = append(out, fmt.Sprintf("%s:%s/%s@%v", timerKindName[tm.Kind], tm.WorkflowID, tm.ID, tm.Due.Sub(T0)))
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

// T0 is the base of every fixture time; renders show offsets from it.
var T0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(T0.Add(d)) }

const (
	scheduled    = durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED
	started      = durablev1.ActivityState_ACTIVITY_STATE_STARTED
	retrying     = durablev1.ActivityState_ACTIVITY_STATE_RETRYING
	deadLettered = durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
)

// NewActivity returns an activity of type "Charge" in queue "q" whose
// state's own time (next attempt, lease deadline or dead-lettered time) is
// T0+d, with queue sequence number seq.
func NewActivity(wf, id string, state durablev1.ActivityState, d time.Duration, seq int64) *durablev1.ActivityRecord {
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

// NewWorkflow returns a workflow of type "Order" in queue "q" whose
// workflow task is in state wt, due (scheduled) or ending its lease
// (started) at T0+d, with queue sequence number seq.
func NewWorkflow(id string, wt durablev1.WorkflowTaskState, d time.Duration, seq int64) *durablev1.WorkflowRecord {
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
