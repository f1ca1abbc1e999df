package engine

import (
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The rules of an activity: its lease, heartbeats, completion, failure (the
// one retry path, for reported failures and expired leases alike), the
// dead letter and the timers that run out on it. Pure functions: see
// rules.go.

// leaseActivity hands the attempt that queue entry q names to the worker
// identity at now: the attempt starts, its lease runs to LeaseDeadline under
// the policy in force, and a lease timer is set there. An entry the record
// has moved on from since it was queued is errStaleEntry. It returns the
// task the worker receives.
func leaseActivity(a *durablev1.ActivityRecord, q QueueEntry, identity string, now time.Time, env *ruleEnv) (step, *durablev1.ActivityTask, error) {
	if cur, ok := QueueEntryOf(a); !ok || cur.Seq != q.Seq {
		return step{}, nil, errStaleEntry
	}
	in := a.GetInfo()
	waited := now.Sub(in.GetNextAttemptTime().AsTime())
	a.LeaseId = env.Draw.LeaseID()
	in.State = stateStarted
	in.LastStartedTime = ts(now)
	in.LastWorkerIdentity = identity
	in.NextAttemptTime = nil
	view := env.view(in)
	deadline, _ := LeaseDeadline(view)
	in.LeaseDeadline = ts(deadline)
	addAttempt(in, &durablev1.AttemptRecord{Attempt: in.GetAttempt(), Identity: identity, StartedTime: ts(now)}, env.MaxAttemptRecords)
	s := step{Activity: a, Effects: []effect{
		{kind: effSetTimer, timer: Timer{Due: deadline, Kind: ActivityLeaseTimer, WorkflowID: in.GetWorkflowId(), ID: in.GetActivityId()}},
		{kind: effObserve, obs: observation{kind: obsStarted, activityType: in.GetActivityType(), attempt: in.GetAttempt(), d: max(waited, 0)}},
	}}
	return s, &durablev1.ActivityTask{
		TaskToken:        encodeToken(&durablev1.TaskToken{WorkflowId: in.GetWorkflowId(), ActivityId: in.GetActivityId(), Attempt: in.GetAttempt(), LeaseId: a.GetLeaseId()}),
		WorkflowId:       in.GetWorkflowId(),
		WorkflowType:     a.GetWorkflowType(),
		ActivityId:       in.GetActivityId(),
		ActivityType:     in.GetActivityType(),
		Input:            a.GetInput(),
		Attempt:          in.GetAttempt(),
		MaxAttempts:      view.GetMaxAttempts(),
		HeartbeatDetails: in.GetHeartbeatDetails(),
		ScheduledTime:    in.GetScheduledTime(),
		StartedTime:      in.GetLastStartedTime(),
		Deadline:         in.GetLeaseDeadline(),
		HeartbeatTimeout: optionsInForce(view).GetHeartbeatTimeout(),
		IdempotencyKey:   in.GetIdempotencyKey(),
		TaskQueue:        in.GetTaskQueue(),
	}, nil
}

// addAttempt adds an attempt to the trail, keeping at most limit records and
// counting those it lets go.
func addAttempt(in *durablev1.PendingActivity, r *durablev1.AttemptRecord, limit int) {
	in.Attempts = append(in.Attempts, r)
	if over := len(in.Attempts) - limit; over > 0 {
		in.Attempts = append(in.Attempts[:0:0], in.Attempts[over:]...)
		in.AttemptsTruncated += int32(over)
	}
}

// liveLease refuses a token whose lease is not the activity's live one: the
// attempt ended (or another began), whatever the worker still believes.
func liveLease(a *durablev1.ActivityRecord, t *durablev1.TaskToken) error {
	if a.GetInfo().GetState() != stateStarted || a.GetLeaseId() != t.GetLeaseId() || a.GetInfo().GetAttempt() != t.GetAttempt() {
		return ErrStaleTask
	}
	return nil
}

// recordHeartbeat moves the lease deadline to now + heartbeat_timeout (never
// past start-to-close or the schedule-to-close expiry, all as the policy in
// force says) and keeps details as the checkpoint the next attempt
// receives. A deadline that moves gets a lease timer there; without a
// heartbeat timeout it stays, and no timer piles up.
func recordHeartbeat(a *durablev1.ActivityRecord, t *durablev1.TaskToken, details []byte, now time.Time, env *ruleEnv) (step, error) {
	if err := liveLease(a, t); err != nil {
		return step{}, err
	}
	in := a.GetInfo()
	in.LastHeartbeatTime = ts(now)
	in.HeartbeatDetails = details
	before := in.GetLeaseDeadline().AsTime()
	deadline, _ := LeaseDeadline(env.view(in))
	in.LeaseDeadline = ts(deadline)
	s := step{Activity: a}
	if !deadline.Equal(before) {
		s.effect(effect{kind: effSetTimer, timer: Timer{Due: deadline, Kind: ActivityLeaseTimer, WorkflowID: in.GetWorkflowId(), ID: in.GetActivityId()}})
	}
	return s, nil
}

// completeActivity records the result of the live attempt: the attempt's
// Started and the activity's Completed go to history, the activity is kept
// as finished and goes, and the workflow w runs again.
func completeActivity(a *durablev1.ActivityRecord, w *durablev1.WorkflowRecord, t *durablev1.TaskToken, req *durablev1.CompleteActivityTaskRequest, now time.Time, env *ruleEnv) (step, error) {
	if err := liveLease(a, t); err != nil {
		return step{}, err
	}
	in := a.GetInfo()
	s := step{Activity: a}
	s.endAttempt(in, now, nil, AttemptCompleted)
	s.record(w, now,
		startedEvent(a),
		&durablev1.HistoryEvent{Type: evActivityCompleted, ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType(), Result: req.GetResult(), Identity: req.GetIdentity(), ScheduledEventId: a.GetScheduledEventId()},
	)
	s.finish(w, FinishedCompleted, now, env)
	return s, nil
}

// failActivity is a failure the worker reports for the live attempt: see
// failAttempt.
func failActivity(a *durablev1.ActivityRecord, w *durablev1.WorkflowRecord, t *durablev1.TaskToken, f *durablev1.Failure, now time.Time, env *ruleEnv) (step, error) {
	if err := liveLease(a, t); err != nil {
		return step{}, err
	}
	var s step
	s.failAttempt(a, w, f, now, false, env)
	return s, nil
}

// failAttempt is the one retry path: reported failures and expired leases
// (timedOut) both come through here, and Decide, seeing the activity under
// the policy in force, says what follows: the activity fails (Started and
// Failed in history, the workflow runs again), is dead-lettered, or its next
// attempt is queued after the jittered backoff, with nothing in history.
func (s *step) failAttempt(a *durablev1.ActivityRecord, w *durablev1.WorkflowRecord, f *durablev1.Failure, now time.Time, timedOut bool, env *ruleEnv) {
	in := a.GetInfo()
	s.Activity = a
	setLastFailure(in, f)
	d := Decide(env.view(in), f, now, env.Draw.Jitter)
	result := resultOf(d.Outcome)
	if timedOut {
		result = AttemptTimedOut
	}
	s.endAttempt(in, now, f, result)
	switch d.Outcome {
	case OutcomeFail:
		s.record(w, now,
			startedEvent(a),
			&durablev1.HistoryEvent{Type: evActivityFailed, ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType(), Failure: f, Attempt: in.GetAttempt(), ScheduledEventId: a.GetScheduledEventId()},
		)
		s.finish(w, FinishedFailed, now, env)
		return
	case OutcomeDeadLetter:
		s.deadLetter(a, w, d.Failure, now)
		return
	}
	in.State = stateRetrying
	in.Attempt++
	in.NextAttemptTime = ts(d.Next)
	in.LeaseDeadline = nil
	a.Seq = env.Draw.NextID()
	s.queued(a, false, env)
}

// resultOf is how metrics name the end of an attempt the retry rule decided.
func resultOf(o Outcome) AttemptResult {
	switch o {
	case OutcomeFail:
		return AttemptFailed
	case OutcomeDeadLetter:
		return AttemptDeadLettered
	}
	return AttemptRetried
}

// queued adds what an activity just queued needs: its queue entry and its
// timers under the policy in force (the schedule-to-close one only when the
// budget is new, on scheduling and redrive).
func (s *step) queued(a *durablev1.ActivityRecord, newBudget bool, env *ruleEnv) {
	if q, ok := QueueEntryOf(a); ok {
		s.effect(effect{kind: effEnqueue, entry: q})
	}
	for _, t := range env.timersOf(a) {
		if t.Kind != ScheduleToCloseTimer || newBudget {
			s.effect(effect{kind: effSetTimer, timer: t})
		}
	}
}

// deadLetter parks the activity in the DLQ with failure f: its timers go,
// ActivityDeadLettered goes to history, and the workflow keeps waiting.
func (s *step) deadLetter(a *durablev1.ActivityRecord, w *durablev1.WorkflowRecord, f *durablev1.Failure, now time.Time) {
	in := a.GetInfo()
	in.State = stateDead
	setLastFailure(in, f)
	in.DeadLetteredTime = ts(now)
	in.NextAttemptTime = nil
	in.LeaseDeadline = nil
	w.Info.DeadLetters++
	s.Activity = a
	s.effect(effect{kind: effDropTimers}, effect{kind: effDeadLettered, failure: f, operation: in.GetRedrivenByOperation()})
	s.record(w, now, &durablev1.HistoryEvent{
		Type: evActivityDeadLettered, ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType(),
		Attempt: in.GetAttempt(), Failure: f, ScheduledEventId: a.GetScheduledEventId(),
	})
}

// endAttempt closes the open attempt record at now with failure f (nil:
// completed): its latency is sampled and the Observer hears how it ended.
// An activity with no attempt under way has nothing to close.
func (s *step) endAttempt(in *durablev1.PendingActivity, now time.Time, f *durablev1.Failure, result AttemptResult) {
	n := len(in.Attempts)
	if n == 0 || in.Attempts[n-1].GetEndedTime() != nil || in.GetState() != stateStarted {
		return
	}
	r := in.Attempts[n-1]
	r.EndedTime = ts(now)
	r.Failure = f
	took := now.Sub(r.GetStartedTime().AsTime())
	s.effect(effect{kind: effAttemptEnded, at: now, failed: f != nil,
		obs: observation{kind: obsEnded, activityType: in.GetActivityType(), result: result, d: took}})
}

// finish ends the step's activity with outcome (it is kept as finished, then
// deleted) and makes its workflow run again.
func (s *step) finish(w *durablev1.WorkflowRecord, outcome string, now time.Time, env *ruleEnv) {
	s.effect(effect{kind: effFinish, outcome: outcome, at: now})
	w.Info.PendingActivities--
	s.scheduleWorkflowTask(w, now, env)
	s.Workflow = w
}

// maxAttemptsOf is the attempt whose failure dead-letters an activity with
// these options: the policy's, or the daemon's --dlq-after-attempts.
func maxAttemptsOf(opts *durablev1.ActivityOptions, d PolicyDefaults) int32 {
	if n := opts.GetRetryPolicy().GetMaxAttempts(); n > 0 {
		return n
	}
	return d.MaxAttempts
}
