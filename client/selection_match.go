package client

import (
	"fmt"
	"strings"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// What a Selection matches, here and as the daemon's queries.

// Matches reports whether a passes every word of s, with the time now for
// nopoller.
func (s Selection) Matches(a *durablev1.PendingActivity) bool {
	return s.MatchesAt(a, time.Now())
}

// MatchesAt is Matches at the time now, for a console that renders from its
// own clock. Without the daemon's task queues, nopoller means due for more
// than NoPollerAfter and not taken (WaitsOnPoller).
func (s Selection) MatchesAt(a *durablev1.PendingActivity, now time.Time) bool {
	return s.matches(a, now, nil, false)
}

// MatchesOnQueues is MatchesAt with the daemon's task queues (TaskQueues,
// or the Watch's task_queues), so that nopoller is the daemon's rule: due,
// and no worker polls its queue for activities (ActivityWait).
func (s Selection) MatchesOnQueues(a *durablev1.PendingActivity, now time.Time, queues []*durablev1.TaskQueue) bool {
	return s.matches(a, now, queues, true)
}

func (s Selection) matches(a *durablev1.PendingActivity, now time.Time, queues []*durablev1.TaskQueue, queuesKnown bool) bool {
	switch {
	case s.FailureType != "" && a.GetLastFailure().GetType() != s.FailureType:
		return false
	case s.Fingerprint != "" && FingerprintOf(a) != s.Fingerprint:
		return false
	case s.ActivityType != "" && a.GetActivityType() != s.ActivityType:
		return false
	case s.WorkflowID != "" && a.GetWorkflowId() != s.WorkflowID:
		return false
	case s.WorkflowPrefix != "" && !strings.HasPrefix(a.GetWorkflowId(), s.WorkflowPrefix):
		return false
	case s.TaskQueue != "" && a.GetTaskQueue() != s.TaskQueue:
		return false
	case s.State != durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED && a.GetState() != s.State:
		return false
	case a.GetAttempt() < s.MinAttempt:
		return false
	case s.NoPoller && !queuesKnown && !WaitsOnPoller(a, now):
		return false
	case s.NoPoller && queuesKnown && !noPollerOn(a, now, queues):
		return false
	case !s.DeadAfter.IsZero() && (a.GetDeadLetteredTime() == nil || a.GetDeadLetteredTime().AsTime().Before(s.DeadAfter)):
		return false
	case !s.DeadBefore.IsZero() && (a.GetDeadLetteredTime() == nil || !a.GetDeadLetteredTime().AsTime().Before(s.DeadBefore)):
		return false
	}
	for _, t := range s.Text {
		if !containsFold(a.GetWorkflowId(), t) && !containsFold(a.GetActivityId(), t) && !containsFold(a.GetActivityType(), t) {
			return false
		}
	}
	return true
}

// FingerprintOf is the fingerprint of a's last failure: the one the daemon
// sent, or computed as the daemon computes it.
func FingerprintOf(a *durablev1.PendingActivity) string {
	if fp := a.GetFailureFingerprint(); fp != "" || a.GetLastFailure() == nil {
		return fp
	}
	return activity.Fingerprint(a.GetLastFailure())
}

// WaitsOnPoller reports whether a has been due for more than NoPollerAfter
// at now without a worker taking it: scheduled, or retrying with its
// backoff over (NextOverdue).
func WaitsOnPoller(a *durablev1.PendingActivity, now time.Time) bool {
	return NextOf(a, now).Kind == NextOverdue
}

func noPollerOn(a *durablev1.PendingActivity, now time.Time, queues []*durablev1.TaskQueue) bool {
	w, ok := ActivityWait(a, queues, now)
	return ok && w.NoPoller
}

// containsFold reports whether lowerSub (lower-case) is in s, ignoring case.
func containsFold(s, lowerSub string) bool {
	return strings.Contains(strings.ToLower(s), lowerSub)
}

// DeadLetterFilter is the daemon's filter for the letters s selects, and
// whether the daemon selects with it exactly what s does (exact). When not
// exact the filter selects more (words the daemon has no field for: a
// workflow prefix, a queue, an attempt, free text), and the letters it
// returns must be narrowed with Matches. Call ForDeadLetters first.
func (s Selection) DeadLetterFilter() (f *durablev1.DeadLetterFilter, exact bool) {
	f = &durablev1.DeadLetterFilter{
		WorkflowId: s.WorkflowID, ActivityType: s.ActivityType,
		FailureType: s.FailureType, FailureFingerprint: s.Fingerprint,
		DeadLetteredAfter: timestamp(s.DeadAfter), DeadLetteredBefore: timestamp(s.DeadBefore),
	}
	exact = s.WorkflowPrefix == "" && s.TaskQueue == "" && s.MinAttempt == 0 && !s.NoPoller && len(s.Text) == 0
	return f, exact
}

// ForDeadLetters reports words that can select no dead letter: a state
// other than dead, and nopoller (a letter waits for a redrive, not a
// worker).
func (s Selection) ForDeadLetters() error {
	if s.State != durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED && s.State != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED {
		return &SelectionError{Word: "state:" + StateWord(s.State), Reason: "dead letters are all state:dead"}
	}
	if s.NoPoller {
		return &SelectionError{Word: "nopoller", Reason: "a dead letter waits for a redrive, not for a worker"}
	}
	return nil
}

// ListActivitiesRequest is the daemon's query for the activities s selects,
// and whether the daemon selects with it exactly what s does (exact); when
// not, narrow what it returns with Matches.
func (s Selection) ListActivitiesRequest() (req *durablev1.ListActivitiesRequest, exact bool) {
	req = &durablev1.ListActivitiesRequest{
		State: s.State, MinAttempt: s.MinAttempt, FailureType: s.FailureType, FailureFingerprint: s.Fingerprint,
		ActivityType: s.ActivityType, TaskQueue: s.TaskQueue,
	}
	exact = s.WorkflowID == "" && s.WorkflowPrefix == "" && !s.NoPoller && len(s.Text) == 0 &&
		s.DeadAfter.IsZero() && s.DeadBefore.IsZero()
	return req, exact
}

// SelectionOfFilter is the selection a daemon filter makes, for showing an
// operation's or an audit record's filter in the same words.
func SelectionOfFilter(f *durablev1.DeadLetterFilter) Selection {
	s := Selection{
		WorkflowID: f.GetWorkflowId(), ActivityType: f.GetActivityType(),
		FailureType: f.GetFailureType(), Fingerprint: f.GetFailureFingerprint(),
	}
	if t := f.GetDeadLetteredAfter(); t != nil {
		s.DeadAfter = t.AsTime()
	}
	if t := f.GetDeadLetteredBefore(); t != nil {
		s.DeadBefore = t.AsTime()
	}
	return s
}

// ForWorkflows reports words that are about activities, which a list of
// workflows cannot apply: it takes wf:, type: (the workflow's failure),
// queue: and free text.
func (s Selection) ForWorkflows() error {
	for _, w := range []struct {
		set  bool
		word string
	}{
		{s.Fingerprint != "", "fp:" + s.Fingerprint},
		{s.ActivityType != "", "act:" + s.ActivityType},
		{s.State != durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED, "state:" + StateWord(s.State)},
		{s.MinAttempt > 0, fmt.Sprintf("attempt>=%d", s.MinAttempt)},
		{s.NoPoller, "nopoller"},
		{!s.DeadAfter.IsZero() || !s.DeadBefore.IsZero(), "dead>= or dead<"},
	} {
		if w.set {
			return &SelectionError{Word: w.word, Reason: "selects activities; workflows take wf:, type: (their failure), queue: and text"}
		}
	}
	return nil
}

// MatchesWorkflow reports whether w passes the words of s that apply to a
// workflow (see ForWorkflows): wf: its id, type: the type of the failure it
// ended with, queue: its task queue, free text its id or workflow type.
func (s Selection) MatchesWorkflow(w *durablev1.WorkflowInfo) bool {
	switch {
	case s.FailureType != "" && w.GetFailure().GetType() != s.FailureType:
		return false
	case s.WorkflowID != "" && w.GetWorkflowId() != s.WorkflowID:
		return false
	case s.WorkflowPrefix != "" && !strings.HasPrefix(w.GetWorkflowId(), s.WorkflowPrefix):
		return false
	case s.TaskQueue != "" && w.GetTaskQueue() != s.TaskQueue:
		return false
	}
	for _, t := range s.Text {
		if !containsFold(w.GetWorkflowId(), t) && !containsFold(w.GetWorkflowType(), t) {
			return false
		}
	}
	return true
}
