package engine

// Rules and runtime.
//
// The rules of durable are the functions of the rules_*.go files: those of
// an activity (rules_activity.go), of a workflow and its tasks
// (rules_workflow.go), of a redrive (rules_redrive.go) and of timers that
// come due (rules_timers.go). Each transition is a function of the records
// it reads, the request, the time and a ruleEnv (the daemon's settings, the
// policy overrides in force, and a drawer for whatever is random or
// id-like: the jitter step, queue sequence numbers, lease ids). It returns
// a step: the records as they become, the history events to append
// (numbered and stamped) and effects, plain values that say what else must
// happen (a task queued, a timer set, an activity kept as finished, a
// workflow closed, something for the Observer). A rule reads no clock, no
// store and no lock, and starts no goroutine; it returns a typed error for
// an illegal pair (a stale lease, a command after the one that closed the
// workflow). Its table test is the rules_*_test.go beside it.
//
// A rule owns the records it is given: it changes them in place and returns
// them in the step. The runtime reads fresh copies in its transaction for
// each call, so nothing else sees a record before it is written.
//
// The runtime begins where a rule is called: the Engine methods of
// activity.go, workflow.go, timers.go and redrive.go read the records in a
// store transaction, call the rule, and hand its step to applyStep
// (apply.go), which writes the records and events and does the effects
// through the Tx and the change, always in the same order. Queues, timers,
// polls, watchers and batches (batch.go, index.go, poll.go, runtime*.go)
// never decide anything a rule decides.

import (
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// ruleEnv is what a rule may not find out for itself. The runtime builds one
// per transition (Engine.env); a test fills one in.
type ruleEnv struct {
	// Overrides is the policy override table in force.
	Overrides overrideTable
	// Defaults fill what an activity's options leave 0: the daemon's
	// --dlq-after-attempts and default start-to-close timeout.
	Defaults PolicyDefaults
	// MaxAttemptRecords bounds the attempt trail an activity keeps.
	MaxAttemptRecords int
	// WorkflowTaskTimeout is how long a workflow task's lease lasts.
	WorkflowTaskTimeout time.Duration
	// Draw is where the jitter and the ids come from.
	Draw drawer
}

// drawer is what a rule draws and may not make up: the delay before a retry
// (full jitter of its backoff), the next queue sequence number, a fresh
// lease id.
type drawer interface {
	Jitter(backoff time.Duration) time.Duration
	NextID() int64
	LeaseID() int64
}

// view is the activity as its next decision sees it, under the override in
// force (see decisionView).
func (r *ruleEnv) view(in *durablev1.PendingActivity) *durablev1.PendingActivity {
	return viewUnder(in, r.Overrides.lookup(in.GetActivityType(), in.GetTaskQueue()), r.Defaults)
}

// timersOf is TimersOf under the policy in force (see Engine.timersOf).
func (r *ruleEnv) timersOf(a *durablev1.ActivityRecord) []Timer {
	return timersUnder(a, r.view(a.GetInfo()))
}

// step is what a rule decided.
type step struct {
	// Activity is the activity the transition is about, as it becomes. It
	// is written, unless an effFinish ends it; nil when the transition
	// writes none.
	Activity *durablev1.ActivityRecord
	// Workflow is written last when set. Events go to its history.
	Workflow *durablev1.WorkflowRecord
	// Scheduled are the activities the transition creates, Timers the
	// workflow timers it starts.
	Scheduled []*durablev1.ActivityRecord
	Timers    []*durablev1.TimerRecord
	// Events are numbered and stamped already (see record).
	Events  []*durablev1.HistoryEvent
	Effects []effect
}

// effectKind says what an effect asks of the runtime.
type effectKind uint8

const (
	// effEnqueue makes entry pollable once the transition is published:
	// an activity's attempt or a workflow task, due at entry.Due.
	effEnqueue effectKind = iota + 1
	// effSetTimer sets timer.
	effSetTimer
	// effTimerMovedLater sets again a timer that fired early (an override
	// moved it later): timer is it, at the time it is due now.
	effTimerMovedLater
	// effDropTimers drops the timers of the step's activity (it is
	// dead-lettered and waits for an operator).
	effDropTimers
	// effObserve tells the Observer obs once the change is published.
	effObserve
	// effAttemptEnded ends the attempt under way at at: obs for the
	// Observer, and a sample for the latency histograms (failed or not).
	effAttemptEnded
	// effFinish ends the step's activity at at: kept as finished with
	// outcome and its attempt trail, then deleted.
	effFinish
	// effDeadLettered counts the step's activity as dead-lettered
	// (metrics, the redrive operation that released it, if any) and logs
	// failure.
	effDeadLettered
	// effDeleteTimer deletes the record of workflow timer timer, which
	// fired.
	effDeleteTimer
	// effCloseWorkflow drops what the step's workflow, closed at at, left
	// pending (its activities, kept as finished) and wakes whoever waits
	// for it to close.
	effCloseWorkflow
)

// effect is one thing a transition needs done besides writing its records
// and events. Only the fields its kind names are set.
type effect struct {
	kind    effectKind
	at      time.Time
	entry   QueueEntry
	timer   Timer
	obs     observation
	failed  bool
	outcome string
	failure *durablev1.Failure
	// operation is the redrive operation whose letter dead-lettered again
	// (effDeadLettered); empty for none.
	operation string
}

// stepCap is room for the effects and the events of most transitions (a
// completion has three of each), so that a step allocates each slice once.
const stepCap = 3

func (s *step) effect(ef ...effect) {
	if s.Effects == nil {
		s.Effects = make([]effect, 0, max(len(ef), stepCap))
	}
	s.Effects = append(s.Effects, ef...)
}

// record numbers events after the last of w's history, stamps those without
// a time with now and adds them to the step. The runtime appends them in
// the step's transaction.
func (s *step) record(w *durablev1.WorkflowRecord, now time.Time, events ...*durablev1.HistoryEvent) {
	for _, ev := range events {
		ev.EventId = w.NextEventId
		if ev.Time == nil {
			ev.Time = ts(now)
		}
		w.NextEventId++
	}
	w.Info.HistoryLength = w.NextEventId - 1
	if s.Events == nil {
		s.Events = make([]*durablev1.HistoryEvent, 0, max(len(events), stepCap))
	}
	s.Events = append(s.Events, events...)
	s.Workflow = w
}

// viewUnder is in under the override o: in itself when there is none, else a
// copy with o in force. Callers only read it.
func viewUnder(in *durablev1.PendingActivity, o *durablev1.PolicyOverride, d PolicyDefaults) *durablev1.PendingActivity {
	if o == nil {
		return in
	}
	v := decisionCopy(in)
	InForce(v, o, d)
	return v
}

// timersUnder is TimersOf of a under view, the activity as the policy in
// force shows it: the lease timer at the lease deadline the options in
// force give, the schedule-to-close timer at the expiry they give.
func timersUnder(a *durablev1.ActivityRecord, view *durablev1.PendingActivity) []Timer {
	rec := a
	if view != a.GetInfo() {
		rec = &durablev1.ActivityRecord{Info: view}
	}
	out := TimersOf(rec)
	for i, t := range out {
		if t.Kind == ActivityLeaseTimer {
			out[i].Due, _ = LeaseDeadline(view)
		}
	}
	return out
}
