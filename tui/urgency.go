package tui

import (
	"time"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// urgency is how soon an operator should look at an activity; lower is more
// urgent. The home view sorts by it first.
type urgency int

const (
	// urgencyOverdue is work that should be happening and is not: due and
	// not handed out for longer than client.NoPollerAfter, or running past its
	// lease deadline.
	urgencyOverdue urgency = iota
	// urgencyDead is a dead letter: nothing happens until someone acts.
	urgencyDead
	// urgencyRetrying is an activity failing its way through its attempts.
	urgencyRetrying
	// urgencyRunning is an activity a worker holds.
	urgencyRunning
	// urgencyScheduled is a first attempt not yet overdue.
	urgencyScheduled
)

// urgencyOf ranks a at now. An activity only ever moves up to overdue as
// time passes, at client.OverdueFrom, and the home view moves it then. A stalled
// workflow task is overdue: its row is shown only once its wait passed the
// grace on a queue nobody polls (queues.go).
func urgencyOf(a *durablev1.PendingActivity, now time.Time) urgency {
	if isWorkflowTask(a) {
		return urgencyOverdue
	}
	if isDead(a) {
		return urgencyDead
	}
	if at, ok := client.OverdueFrom(a); ok && now.After(at) {
		return urgencyOverdue
	}
	switch a.GetState() {
	case durablev1.ActivityState_ACTIVITY_STATE_RETRYING:
		return urgencyRetrying
	case durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		return urgencyRunning
	}
	return urgencyScheduled
}

// stuck reports whether a row is one `!` stops at: nothing will move it
// without someone acting (a dead letter, overdue work, no worker polling).
func (u urgency) stuck() bool { return u <= urgencyDead }

// sortKey is what the home view is ordered by; `s` cycles through them.
type sortKey int

const (
	// sortUrgency: overdue, dead-lettered, retrying (higher attempt first),
	// running, scheduled.
	sortUrgency sortKey = iota
	// sortWorkflow: workflow id, then activity id in scheduling order.
	sortWorkflow
	// sortNextDue: the soonest next attempt or lease deadline first; dead
	// letters last.
	sortNextDue
	// sortAttempt: the highest attempt first.
	sortAttempt
	sortKeys // the number of sort keys
)

func (k sortKey) String() string {
	switch k {
	case sortWorkflow:
		return "workflow"
	case sortNextDue:
		return "next due"
	case sortAttempt:
		return "attempt"
	}
	return "urgency"
}

// next is the key `s` switches to.
func (k sortKey) next() sortKey { return (k + 1) % sortKeys }

// ranked is an activity with the urgency it had when it was placed, so the
// order stays a fixed total order between the moments it is re-placed.
type ranked struct {
	a *durablev1.PendingActivity
	u urgency
}

// rankedLess is the home view's order under key k. Every key ends on the
// workflow and activity ids, so the order is total.
func rankedLess(k sortKey, x, y ranked) bool {
	a, b := x.a, y.a
	switch k {
	case sortUrgency:
		if x.u != y.u {
			return x.u < y.u
		}
		switch x.u {
		case urgencyOverdue:
			// The longest overdue first, counted as the countdown column
			// counts: from the due time or the lease deadline.
			ta, _ := nextDue(a)
			tb, _ := nextDue(b)
			if !ta.Equal(tb) {
				return ta.Before(tb)
			}
		case urgencyDead:
			// The newest dead letter first, as on the dead-letter screen.
			ta, tb := a.GetDeadLetteredTime().AsTime(), b.GetDeadLetteredTime().AsTime()
			if !ta.Equal(tb) {
				return ta.After(tb)
			}
		case urgencyRetrying:
			if a.GetAttempt() != b.GetAttempt() {
				return a.GetAttempt() > b.GetAttempt()
			}
		}
	case sortNextDue:
		ta, oka := nextDue(a)
		tb, okb := nextDue(b)
		if oka != okb {
			return oka
		}
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
	case sortAttempt:
		if a.GetAttempt() != b.GetAttempt() {
			return a.GetAttempt() > b.GetAttempt()
		}
	}
	return attemptsLess(a, b)
}

// nextDue is when something next happens to a without anyone acting: its
// next attempt while it waits, its lease deadline while it runs.
func nextDue(a *durablev1.PendingActivity) (time.Time, bool) {
	switch a.GetState() {
	case durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, durablev1.ActivityState_ACTIVITY_STATE_RETRYING:
		return client.DueTime(a)
	case durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		if d := a.GetLeaseDeadline(); d != nil {
			return d.AsTime(), true
		}
	}
	return time.Time{}, false
}
