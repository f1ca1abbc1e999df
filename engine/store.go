package engine

import (
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Store keeps the engine's state. Every state transition of the engine is one
// Update; the store derives the index entries of a record (queue entry,
// timers, dead-letter entry) from the record itself with QueueEntryOf and
// TimersOf, so a record and its indexes always change together.
type Store interface {
	// Update runs fn in one read-write transaction and commits it when fn
	// returns nil. A committed transaction is visible to later ones but is
	// durable only after a Sync that starts after it committed.
	Update(fn func(Tx) error) error
	// View runs fn in a read-only transaction.
	View(fn func(Tx) error) error
	// Sync returns once every transaction committed before the call is on
	// disk. Callers that arrive while a sync runs share the next one (group
	// commit). Update may commit other transactions while a Sync runs (the
	// engine commits leases then); a later Sync covers them.
	Sync() error
	// Close flushes and closes the store.
	Close() error
}

// LongViewStore is a Store whose read views cost something scarce for as
// long as they are open, a connection each: LongViews is how many may stay
// open at once while their readers wait (a Watch's snapshot streaming to a
// slow client). A Watch waits for one of them before it fixes its view. A
// store that does not implement it bounds them only by
// Options.MaxWatchers.
type LongViewStore interface {
	Store
	LongViews() int
}

// Tx is one transaction. Getters return ErrNotFound for a missing record.
// Records passed to Put are owned by the store until the transaction ends;
// callers must not change them afterwards.
type Tx interface {
	GetWorkflow(id string) (*durablev1.WorkflowRecord, error)
	// PutWorkflow writes the record and replaces its queue entry and timers.
	PutWorkflow(w *durablev1.WorkflowRecord) error
	// ListWorkflows returns up to limit workflows with ids after the given one,
	// in id order.
	ListWorkflows(after string, limit int) ([]*durablev1.WorkflowRecord, error)
	// RunningWorkflows calls fn for every running workflow, in id order,
	// until fn returns false. It reads only the running ones, from an index
	// the store keeps with the records. Like ScanActivities, it holds
	// nothing but the transaction while fn runs, so fn may wait.
	RunningWorkflows(fn func(*durablev1.WorkflowRecord) bool) error
	// ClosedWorkflows calls fn for the workflows that closed at or after
	// since, the most recently closed first, until fn returns false. It
	// reads them from an index by close time and never reads a workflow
	// that closed before since. Like ScanActivities, it holds nothing but
	// the transaction while fn runs, so fn may wait.
	ClosedWorkflows(since time.Time, fn func(*durablev1.WorkflowRecord) bool) error

	// AppendEvents stores events under their event ids.
	AppendEvents(workflowID string, events []*durablev1.HistoryEvent) error
	// History returns a workflow's events in order.
	History(workflowID string) ([]*durablev1.HistoryEvent, error)
	// HistoryRange returns the events with ids from through through, in
	// order, reading none outside them: a workflow task sent to a worker
	// that has the start of the history costs only its new events.
	HistoryRange(workflowID string, from, through int64) ([]*durablev1.HistoryEvent, error)

	GetActivity(workflowID, activityID string) (*durablev1.ActivityRecord, error)
	// PutActivity writes the record and replaces its queue entry, timers and
	// dead-letter entry.
	PutActivity(a *durablev1.ActivityRecord) error
	// DeleteActivity removes the record and all its index entries.
	DeleteActivity(workflowID, activityID string) error
	// UseActivityID records that a workflow scheduled an activity id and
	// reports whether it had done so before. Ids are never released: an
	// activity id is half of an idempotency key.
	UseActivityID(workflowID, activityID string) (used bool, err error)
	// Activities returns every activity record of one workflow.
	Activities(workflowID string) ([]*durablev1.ActivityRecord, error)
	// ScanActivities calls fn for every activity record until fn returns
	// false. It reads in pages and holds nothing but the transaction while
	// fn runs (no iterator, cursor or buffer beyond a page), so fn may wait:
	// a Watch hands what it read to a slow client from inside fn, and the
	// transaction's view stays the same from page to page.
	ScanActivities(fn func(*durablev1.ActivityRecord) bool) error

	GetTimer(workflowID, timerID string) (*durablev1.TimerRecord, error)
	PutTimer(t *durablev1.TimerRecord) error
	DeleteTimer(workflowID, timerID string) error

	// Queued returns up to limit entries of one queue, earliest due first
	// (then lowest Seq).
	Queued(kind TaskKind, queue string, limit int) ([]QueueEntry, error)
	// DueTimers returns up to limit timers, earliest first.
	DueTimers(limit int) ([]Timer, error)
	// QueuedIn calls fn for the entries of every queue of one kind that
	// are due within r, queue by queue and within a queue in Queued's
	// order, until fn returns false. It seeks to r in each queue rather
	// than reading the entries before it.
	QueuedIn(kind TaskKind, r TimeRange, fn func(QueueEntry) bool) error
	// TimersIn calls fn for the timers due within r, earliest first, until
	// fn returns false; it seeks to the start of r.
	TimersIn(r TimeRange, fn func(Timer) bool) error
	// ActivityCounts calls fn with how many activity records are in each
	// state on each task queue (those with none are left out), until fn
	// returns false. The store keeps the counts with the records. kept is
	// false, and fn is not called, when it does not hold them whole (a
	// read-only store of a data directory written by an older release).
	ActivityCounts(fn func(taskQueue string, state durablev1.ActivityState, n int64) bool) (kept bool, err error)
	// DeadLetters calls fn for each dead-lettered activity, oldest first,
	// starting after the given cursor (nil: from the start), until fn returns
	// false. It returns the cursor of the last record passed to fn.
	DeadLetters(after []byte, fn func(*durablev1.ActivityRecord) bool) (last []byte, err error)
	// DeadLettersIn is DeadLetters for the letters dead-lettered within r:
	// it seeks to the start of r rather than reading the letters before it,
	// and stops at its end.
	DeadLettersIn(r TimeRange, after []byte, fn func(*durablev1.ActivityRecord) bool) (last []byte, err error)
	// ActivitiesByState calls fn for the activities in the state index
	// within r, grouped by state (in the enum's order) and within a state by
	// activity type, then in workflow and activity id order, starting after the cursor (nil: from the start), until fn returns
	// false. It returns the cursor of the last record passed to fn. A cursor
	// that is not one of this index, or lies outside r, is an *InvalidError.
	ActivitiesByState(r StateRange, after []byte, fn func(*durablev1.ActivityRecord) bool) (last []byte, err error)

	// PutFinishedActivity keeps an activity that has ended, with its attempt
	// trail, under its workflow and activity ids and in the retention index
	// under its finished time; writing it again replaces it.
	PutFinishedActivity(f *durablev1.FinishedActivity) error
	// FinishedActivities returns the finished activities of one workflow in
	// activity id order.
	FinishedActivities(workflowID string) ([]*durablev1.FinishedActivity, error)
	// DeleteFinishedBefore deletes up to limit finished activities that
	// finished before t, oldest first, and returns how many it deleted.
	DeleteFinishedBefore(t time.Time, limit int) (int, error)

	// GetLatency, PutLatency and ListLatency keep each activity type's
	// all-time latency record (see LatencyRecord).
	GetLatency(activityType string) (*durablev1.LatencyRecord, error)
	PutLatency(l *durablev1.LatencyRecord) error
	ListLatency() ([]*durablev1.LatencyRecord, error)
	// GetLatencyHour returns one type's record of the hour starting at hour.
	GetLatencyHour(activityType string, hour time.Time) (*durablev1.LatencyRecord, error)
	// PutLatencyHour writes an hourly record under its type and hour.
	PutLatencyHour(l *durablev1.LatencyRecord) error
	// LatencyHours calls fn for every hourly record whose hour is at or
	// after since, by type and then hour, until fn returns false. It seeks
	// past each type's older hours rather than reading them.
	LatencyHours(since time.Time, fn func(*durablev1.LatencyRecord) bool) error
	// LatencyHoursBefore returns up to limit hourly records whose hour is
	// before t, by type and then hour.
	LatencyHoursBefore(t time.Time, limit int) ([]*durablev1.LatencyRecord, error)
	// DeleteLatencyHour deletes one hourly record; a missing one is no error.
	DeleteLatencyHour(activityType string, hour time.Time) error

	// GetPolicyOverride returns the override of an activity type on a task
	// queue ("" for every queue).
	GetPolicyOverride(activityType, taskQueue string) (*durablev1.PolicyOverride, error)
	// PutPolicyOverride writes an override under its type and queue,
	// replacing the one there.
	PutPolicyOverride(o *durablev1.PolicyOverride) error
	// DeletePolicyOverride deletes an override; a missing one is no error.
	DeletePolicyOverride(activityType, taskQueue string) error
	// PolicyOverrides returns every override, by type and then queue.
	PolicyOverrides() ([]*durablev1.PolicyOverride, error)

	// PutAudit writes an audit record under its time and id; writing a
	// record with the same time and id again replaces it.
	PutAudit(r *durablev1.AuditRecord) error
	// AuditRecords calls fn for audit records, newest first, starting after
	// the given cursor (nil: the newest), until fn returns false. It returns
	// the cursor of the last record passed to fn.
	AuditRecords(after []byte, fn func(*durablev1.AuditRecord) bool) (last []byte, err error)
	// DeleteAuditBefore deletes up to limit audit records older than t,
	// oldest first, and returns how many it deleted.
	DeleteAuditBefore(t time.Time, limit int) (int, error)

	// GetAudit returns the audit record written under its time and id.
	GetAudit(t time.Time, id int64) (*durablev1.AuditRecord, error)

	// GetOperation returns the operation record numbered seq.
	GetOperation(seq int64) (*durablev1.OperationRecord, error)
	// PutOperation writes an operation record under its seq, replacing the
	// one there.
	PutOperation(r *durablev1.OperationRecord) error
	// DeleteOperation removes an operation record; its work list stays
	// until DeleteOperationItems removes it.
	DeleteOperation(seq int64) error
	// Operations calls fn for operation records, newest (highest seq)
	// first, starting after the given cursor (nil: the newest), until fn
	// returns false. It returns the cursor of the last record passed to fn.
	Operations(after []byte, fn func(*durablev1.OperationRecord) bool) (last []byte, err error)
	// PutOperationItems writes work items of operation seq, refs[i] at
	// index from+i.
	PutOperationItems(seq, from int64, refs []*durablev1.ActivityRef) error
	// OperationItems returns up to limit work items of operation seq, in
	// index order from index from; fewer at the end of the list.
	OperationItems(seq, from int64, limit int) ([]*durablev1.ActivityRef, error)
	// DeleteOperationItems deletes up to limit work items of operation seq,
	// lowest index first, and returns how many it deleted.
	DeleteOperationItems(seq int64, limit int) (int, error)

	// Counter and SetCounter keep the engine's id sequence (queue sequence
	// numbers and audit ids), which must grow across restarts.
	Counter() (int64, error)
	SetCounter(n int64) error
}

// TaskKind tells workflow tasks from activity tasks in a queue.
type TaskKind uint8

const (
	// WorkflowTask is a workflow's decision task.
	WorkflowTask TaskKind = 1
	// ActivityTask is one attempt of an activity.
	ActivityTask TaskKind = 2
)

// QueueEntry is a task waiting in a task queue, pollable from Due on.
type QueueEntry struct {
	Kind       TaskKind
	Queue      string
	Due        time.Time
	Seq        int64
	WorkflowID string
	// ActivityID is empty for a workflow task.
	ActivityID string
}

// TimerKind names what happens when a timer comes due.
type TimerKind uint8

const (
	// ActivityLeaseTimer ends an attempt's lease (start-to-close or heartbeat).
	ActivityLeaseTimer TimerKind = 1
	// ScheduleToStartTimer dead-letters an attempt no worker picked up.
	ScheduleToStartTimer TimerKind = 2
	// ScheduleToCloseTimer dead-letters an activity whose budget ran out.
	ScheduleToCloseTimer TimerKind = 3
	// WorkflowTaskLeaseTimer ends a workflow task's lease.
	WorkflowTaskLeaseTimer TimerKind = 4
	// UserTimer fires a workflow timer.
	UserTimer TimerKind = 5
)

// Timer is an entry of the due-time-ordered timer index.
type Timer struct {
	Due        time.Time
	Kind       TimerKind
	WorkflowID string
	// ID is the activity id or timer id; empty for a workflow task lease.
	ID string
}

// QueueEntryOf returns the queue entry an activity record implies: one while it
// is scheduled or retrying, none otherwise.
func QueueEntryOf(a *durablev1.ActivityRecord) (QueueEntry, bool) {
	in := a.GetInfo()
	switch in.GetState() {
	case durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, durablev1.ActivityState_ACTIVITY_STATE_RETRYING:
		return QueueEntry{
			Kind: ActivityTask, Queue: in.GetTaskQueue(), Due: in.GetNextAttemptTime().AsTime(),
			Seq: a.GetSeq(), WorkflowID: in.GetWorkflowId(), ActivityID: in.GetActivityId(),
		}, true
	}
	return QueueEntry{}, false
}

// WorkflowQueueEntryOf returns the queue entry of a workflow's scheduled task.
func WorkflowQueueEntryOf(w *durablev1.WorkflowRecord) (QueueEntry, bool) {
	if w.GetWtState() != durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED {
		return QueueEntry{}, false
	}
	return QueueEntry{
		Kind: WorkflowTask, Queue: w.GetInfo().GetTaskQueue(), Due: w.GetWtDue().AsTime(),
		Seq: w.GetWtSeq(), WorkflowID: w.GetInfo().GetWorkflowId(),
	}, true
}

// TimersOf returns the timers an activity record implies.
func TimersOf(a *durablev1.ActivityRecord) []Timer {
	in := a.GetInfo()
	wf, id := in.GetWorkflowId(), in.GetActivityId()
	var ts []Timer
	switch in.GetState() {
	case durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		ts = append(ts, Timer{Due: in.GetLeaseDeadline().AsTime(), Kind: ActivityLeaseTimer, WorkflowID: wf, ID: id})
	case durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, durablev1.ActivityState_ACTIVITY_STATE_RETRYING:
		if sts := in.GetOptions().GetScheduleToStartTimeout(); sts != nil && sts.AsDuration() > 0 {
			due := in.GetNextAttemptTime().AsTime().Add(sts.AsDuration())
			ts = append(ts, Timer{Due: due, Kind: ScheduleToStartTimer, WorkflowID: wf, ID: id})
		}
	}
	if in.GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED && in.GetExpirationTime() != nil {
		ts = append(ts, Timer{Due: in.GetExpirationTime().AsTime(), Kind: ScheduleToCloseTimer, WorkflowID: wf, ID: id})
	}
	return ts
}

// WorkflowTimersOf returns the timers a workflow record implies.
func WorkflowTimersOf(w *durablev1.WorkflowRecord) []Timer {
	if w.GetWtState() != durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_STARTED {
		return nil
	}
	return []Timer{{Due: w.GetWtDeadline().AsTime(), Kind: WorkflowTaskLeaseTimer, WorkflowID: w.GetInfo().GetWorkflowId()}}
}

// UserTimerOf returns the timer index entry of a workflow timer.
func UserTimerOf(t *durablev1.TimerRecord) Timer {
	return Timer{Due: t.GetFireTime().AsTime(), Kind: UserTimer, WorkflowID: t.GetWorkflowId(), ID: t.GetTimerId()}
}

// TimeRange is the instants from From up to, not including, Before; a zero
// bound leaves that side open.
type TimeRange struct {
	From, Before time.Time
}

// Contains reports whether t lies in r.
func (r TimeRange) Contains(t time.Time) bool {
	return (r.From.IsZero() || !t.Before(r.From)) && (r.Before.IsZero() || t.Before(r.Before))
}

// StateRange selects part of the state index: the activities of one state
// (unspecified: every state, in the enum's order) and, when ActivityType is
// set, of one type within it.
type StateRange struct {
	State        durablev1.ActivityState
	ActivityType string
}

// IsDeadLetter reports whether an activity record belongs in the dead-letter
// index, keyed by its dead-lettered time.
func IsDeadLetter(a *durablev1.ActivityRecord) bool {
	return a.GetInfo().GetState() == durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
}
