package client

import (
	"fmt"
	"strings"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// What a pending activity waits on, and when it tries again: one rule for
// wf and the console, from the absolute times the daemon sends and a clock.

// NextKind is what a pending activity waits on.
type NextKind string

const (
	// NextBackoff: its next attempt time is still ahead, a retry's backoff
	// or a first attempt scheduled for later. Nobody needs to act.
	NextBackoff NextKind = "backoff"
	// NextDue: due and queued for a worker, for no longer than
	// NoPollerAfter, the normal hand-off.
	NextDue NextKind = "due"
	// NextOverdue: due for longer than NoPollerAfter and no worker has
	// taken it; most likely nobody polls its queue.
	NextOverdue NextKind = "overdue"
	// NextRunning: a worker holds it under a lease.
	NextRunning NextKind = "running"
	// NextLeaseExpired: running past its lease deadline; the daemon will
	// time the attempt out.
	NextLeaseExpired NextKind = "lease expired"
	// NextDeadLettered: it gave up and waits for an operator's redrive.
	NextDeadLettered NextKind = "dead-lettered"
)

// Next is what a pending activity waits on at one moment (NextOf).
type Next struct {
	// Kind is what it waits on; "" for an activity in no known state.
	Kind NextKind
	// At is the moment Kind refers to: the due time while it waits in its
	// queue (DueTime), the lease deadline while it runs, when it was
	// dead-lettered. Zero when the daemon did not send it.
	At time.Time
	// Left is At less now: ahead while positive (a backoff, a lease),
	// passed while negative (due that long ago). Zero when At is.
	Left time.Duration
	// OverdueFrom is when it is overdue (OverdueFrom); zero when it cannot
	// be.
	OverdueFrom time.Time
}

// Late is how long ago At passed: how long a due activity has waited for
// a worker, or a lease has been expired. Zero while At is ahead.
func (n Next) Late() time.Duration { return max(-n.Left, 0) }

// Overdue reports whether work that should be happening is not: due for
// longer than NoPollerAfter without a worker taking it, or running past its
// lease deadline.
func (n Next) Overdue() bool { return n.Kind == NextOverdue || n.Kind == NextLeaseExpired }

// NextOf is what a waits on at now.
func NextOf(a *durablev1.PendingActivity, now time.Time) Next {
	var n Next
	n.OverdueFrom, _ = OverdueFrom(a)
	switch a.GetState() {
	case durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, durablev1.ActivityState_ACTIVITY_STATE_RETRYING:
		n.Kind = NextDue
		n.At, _ = DueTime(a)
		switch {
		case n.At.IsZero():
			// Without a due time it is queued, and nothing says since when.
		case n.At.After(now):
			n.Kind = NextBackoff
		case now.After(n.OverdueFrom):
			n.Kind = NextOverdue
		}
	case durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		n.Kind = NextRunning
		if d := a.GetLeaseDeadline(); d != nil {
			n.At = d.AsTime()
			if now.After(n.At) {
				n.Kind = NextLeaseExpired
			}
		}
	case durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED:
		n.Kind = NextDeadLettered
		if t := a.GetDeadLetteredTime(); t != nil {
			n.At = t.AsTime()
		}
	}
	if !n.At.IsZero() {
		n.Left = n.At.Sub(now)
	}
	return n
}

// DueTime is when a waiting activity may be handed out: its next attempt
// time, or for a first attempt without one, when it was scheduled. ok is
// false when the daemon sent neither.
func DueTime(a *durablev1.PendingActivity) (due time.Time, ok bool) {
	t := a.GetNextAttemptTime()
	if t == nil {
		t = a.GetScheduledTime()
	}
	if t == nil {
		return time.Time{}, false
	}
	return t.AsTime(), true
}

// OverdueFrom is when a becomes overdue: its due time plus NoPollerAfter
// while it waits in its queue, its lease deadline while it runs. ok is false
// when nothing about a can become overdue (a dead letter, no due time, a
// lease without a deadline). The moment only moves when the activity
// changes, so a view can re-rank a row at it without polling.
func OverdueFrom(a *durablev1.PendingActivity) (at time.Time, ok bool) {
	switch a.GetState() {
	case durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, durablev1.ActivityState_ACTIVITY_STATE_RETRYING:
		if due, ok := DueTime(a); ok {
			return due.Add(NoPollerAfter), true
		}
	case durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		if d := a.GetLeaseDeadline(); d != nil {
			return d.AsTime(), true
		}
	}
	return time.Time{}, false
}

// RetrySchedule is when a pending activity tries again and when it gives
// up, under its options in force (RetryScheduleOf).
type RetrySchedule struct {
	// Attempt is the attempt the schedule starts from: the one due next
	// while the activity waits, the one running (Running), the last one
	// (DeadLettered).
	Attempt int32
	// Running: Attempt runs now, and Attempts are those that follow if it
	// fails, timed from its failure.
	Running bool
	// DeadLettered: it gave up after Attempt; a redrive starts again at
	// attempt 1.
	DeadLettered bool
	// GivesUpAfter is the attempt whose failure dead-letters it: the max
	// attempts in force, or Attempt when an override lowered that below
	// the attempt already reached. Zero when unknown (no max attempts), and
	// then there is no schedule to tell.
	GivesUpAfter int32
	// Attempts are the next attempts, at most ScheduleShown of them after
	// the first.
	Attempts []PlannedAttempt
	// More: attempts after the last of Attempts come before it gives up.
	More bool
}

// ScheduleShown is how many attempts a schedule lists after the next one.
const ScheduleShown = 5

// PlannedAttempt is one attempt of a RetrySchedule.
type PlannedAttempt struct {
	// Attempt is its number, 1-based.
	Attempt int32
	// After is how long from now it starts (from the running attempt's
	// failure, while one runs).
	After time.Duration
	// Bound: After is an upper bound, the sum of the backoffs before it.
	// The daemon draws a full jitter below each backoff, and the attempts'
	// own run time comes on top. The attempt already due is exact.
	Bound bool
}

// RetryScheduleOf is a's retry schedule at now under its options in force
// (activity.OptionsInForce) and the max attempts in force.
func RetryScheduleOf(a *durablev1.PendingActivity, now time.Time) RetrySchedule {
	s := RetrySchedule{Attempt: a.GetAttempt()}
	switch a.GetState() {
	case durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED:
		s.DeadLettered = true
		return s
	case durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		s.Running = true
	}
	if a.GetMaxAttempts() <= 0 {
		return s
	}
	s.GivesUpAfter = max(a.GetMaxAttempts(), s.Attempt)
	policy := activity.OptionsInForce(a).GetRetryPolicy()
	var after time.Duration
	if !s.Running {
		// Scheduled and retrying activities carry the number of the
		// attempt due next, and when.
		if t := a.GetNextAttemptTime(); t != nil {
			after = max(t.AsTime().Sub(now), 0)
		}
		s.Attempts = append(s.Attempts, PlannedAttempt{Attempt: s.Attempt, After: after})
	}
	for k := s.Attempt + 1; k <= s.GivesUpAfter; k++ {
		if k-s.Attempt > ScheduleShown {
			s.More = true
			break
		}
		// Decide waits Backoff(policy, n) after attempt n fails.
		after += activity.Backoff(policy, int(k-1))
		s.Attempts = append(s.Attempts, PlannedAttempt{Attempt: k, After: after, Bound: true})
	}
	return s
}

// Known reports whether there is a schedule to tell: the activity gave up,
// or its max attempts are known.
func (s RetrySchedule) Known() bool { return s.DeadLettered || s.GivesUpAfter > 0 }

// Words is the schedule as wf and the console write it, with span writing
// each duration in the writer's own style: "attempt 3 at +1.2s · attempt 4
// at ~+3.6s · … · gives up after attempt 8"; "if attempt 3 fails: · attempt
// 4 at ~+1.0s · …" while an attempt runs.
func (s RetrySchedule) Words(span func(time.Duration) string) string {
	switch {
	case s.DeadLettered:
		return fmt.Sprintf("gave up after attempt %d; a redrive starts again at attempt 1", s.Attempt)
	case !s.Known():
		return "unknown: no max attempts"
	}
	var parts []string
	if s.Running {
		parts = append(parts, fmt.Sprintf("if attempt %d fails:", s.Attempt))
	}
	for _, p := range s.Attempts {
		mark := "+"
		if p.Bound {
			mark = "~+"
		}
		parts = append(parts, fmt.Sprintf("attempt %d at %s%s", p.Attempt, mark, span(p.After)))
	}
	if s.More {
		parts = append(parts, "…")
	}
	return strings.Join(parts, " · ") + fmt.Sprintf(" · gives up after attempt %d", s.GivesUpAfter)
}
