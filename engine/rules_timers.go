package engine

import (
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The rules of timers that come due: an activity's lease, schedule-to-start
// and schedule-to-close timers, a workflow task's lease, a workflow timer.
// Each timer is judged against the record it names, so that one left behind
// by an earlier lease, heartbeat or attempt does nothing. Pure functions:
// see rules.go.

// timerVerdict is what a due activity timer does.
type timerVerdict struct {
	kind verdictKind
	// at is when it acts: the deadline or due time it counts from, however
	// late the engine noticed; for verdictMovedLater, when the timer is
	// due now.
	at time.Time
	// why is the failure type of an expired lease.
	why string
}

type verdictKind uint8

const (
	// verdictNone: the timer was left behind by an earlier lease,
	// heartbeat or attempt, and does nothing.
	verdictNone verdictKind = iota
	// verdictMovedLater: an override moved the timer later; it is set
	// again at at.
	verdictMovedLater
	// verdictLeaseExpired: the lease ended at at (why says which timeout);
	// the attempt fails as a timeout, or the budget ran out with it.
	verdictLeaseExpired
	// verdictNeverStarted: no worker took the attempt within its
	// schedule-to-start timeout; it is dead-lettered.
	verdictNeverStarted
	// verdictBudgetSpent: the schedule-to-close budget ran out at at; the
	// activity is dead-lettered.
	verdictBudgetSpent
)

// activityTimerVerdict judges a due timer t against the activity it names,
// under the policy in force: only a timer that still matches the record
// acts, and one that an override has moved later is set again there. The
// runtime reads the workflow only for a verdict that acts.
func activityTimerVerdict(a *durablev1.ActivityRecord, t Timer, env *ruleEnv) timerVerdict {
	in := a.GetInfo()
	view := env.view(in)
	switch t.Kind {
	case ActivityLeaseTimer:
		if in.GetState() != stateStarted {
			return timerVerdict{}
		}
		deadline, why := LeaseDeadline(view)
		if deadline.After(t.Due) {
			return timerVerdict{kind: verdictMovedLater, at: deadline}
		}
		return timerVerdict{kind: verdictLeaseExpired, at: deadline, why: why}
	case ScheduleToStartTimer:
		if in.GetState() != stateScheduled && in.GetState() != stateRetrying ||
			in.GetNextAttemptTime().AsTime().Add(in.GetOptions().GetScheduleToStartTimeout().AsDuration()).After(t.Due) {
			return timerVerdict{}
		}
		return timerVerdict{kind: verdictNeverStarted, at: t.Due}
	case ScheduleToCloseTimer:
		exp := view.GetExpirationTime()
		if in.GetState() == stateDead || exp == nil {
			return timerVerdict{}
		}
		if exp.AsTime().After(t.Due) {
			return timerVerdict{kind: verdictMovedLater, at: exp.AsTime()}
		}
		return timerVerdict{kind: verdictBudgetSpent, at: exp.AsTime()}
	}
	return timerVerdict{}
}

// fireActivityTimer does what the verdict v on timer t says to a and its
// workflow w (nil for verdictNone and verdictMovedLater): an expired lease
// is a retryable failure of type StartToCloseTimeout or HeartbeatTimeout
// through failAttempt, counted from the deadline; a spent budget and an
// attempt no worker started dead-letter the activity.
func fireActivityTimer(a *durablev1.ActivityRecord, w *durablev1.WorkflowRecord, t Timer, v timerVerdict, env *ruleEnv) step {
	var s step
	in := a.GetInfo()
	timedOut := func(why string) {
		s.effect(effect{kind: effObserve, obs: observation{kind: obsTimedOut, activityType: in.GetActivityType(), timeout: why}})
	}
	switch v.kind {
	case verdictMovedLater:
		t.Due = v.at
		s.effect(effect{kind: effTimerMovedLater, timer: t})
	case verdictLeaseExpired:
		timedOut(v.why)
		if v.why == TimeoutScheduleToClose {
			s.expire(a, w, v.at, env)
			break
		}
		opts := optionsInForce(env.view(in))
		msg := "the attempt did not finish within its start-to-close timeout of " + opts.GetStartToCloseTimeout().AsDuration().String()
		if v.why == TimeoutHeartbeat {
			msg = "no heartbeat within the heartbeat timeout of " + opts.GetHeartbeatTimeout().AsDuration().String()
		}
		s.failAttempt(a, w, systemFailure(v.why, "%s", msg), v.at, true, env)
	case verdictNeverStarted:
		timedOut(TimeoutScheduleToStart)
		s.deadLetter(a, w, systemFailure(TimeoutScheduleToStart,
			"no worker picked the attempt up within its schedule-to-start timeout of %s", in.GetOptions().GetScheduleToStartTimeout().AsDuration()), v.at)
	case verdictBudgetSpent:
		timedOut(TimeoutScheduleToClose)
		s.expire(a, w, v.at, env)
	}
	return s
}

// expire dead-letters an activity whose schedule-to-close budget (in force)
// ran out at now, ending its running attempt if it has one.
func (s *step) expire(a *durablev1.ActivityRecord, w *durablev1.WorkflowRecord, now time.Time, env *ruleEnv) {
	in := a.GetInfo()
	f := systemFailure(TimeoutScheduleToClose, "the activity's schedule-to-close budget of %s ran out",
		optionsInForce(env.view(in)).GetScheduleToCloseTimeout().AsDuration())
	s.endAttempt(in, now, f, AttemptTimedOut)
	s.deadLetter(a, w, f, now)
}

// workflowTaskTimeout fails a workflow task whose lease timer t fired, as
// of its deadline, and schedules it again: unless the task has ended or
// been leased again (a later deadline) since the timer was set.
func workflowTaskTimeout(w *durablev1.WorkflowRecord, t Timer, env *ruleEnv) step {
	if w.GetWtState() != wtStarted || w.GetWtDeadline().AsTime().After(t.Due) {
		return step{}
	}
	at := w.GetWtDeadline().AsTime()
	var s step
	s.record(w, at, &durablev1.HistoryEvent{Type: evWorkflowTaskFailed, Attempt: w.GetWtAttempt(),
		Failure: systemFailure(WorkflowTaskTimeout, "the workflow task was not completed within %s", env.WorkflowTaskTimeout)})
	s.retryWorkflowTask(w, at, env)
	return s
}

// fireUserTimer fires workflow timer t at now: its record (rec; nil if
// gone) goes, and a running workflow w (nil if gone) records TimerFired and
// runs again. An entry whose record has another fire time is left behind by
// an earlier timer of that id and does nothing.
func fireUserTimer(rec *durablev1.TimerRecord, w *durablev1.WorkflowRecord, t Timer, now time.Time, env *ruleEnv) step {
	var s step
	if rec == nil || !rec.GetFireTime().AsTime().Equal(t.Due) {
		return s
	}
	s.effect(effect{kind: effDeleteTimer, timer: t})
	if w == nil || w.GetInfo().GetStatus() != statusRunning {
		return s
	}
	s.record(w, now, &durablev1.HistoryEvent{Type: evTimerFired, TimerId: t.ID})
	s.scheduleWorkflowTask(w, now, env)
	return s
}
