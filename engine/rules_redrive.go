package engine

import (
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The rule of a redrive. Pure: see rules.go.

// redriveLetter puts dead letter a back in its queue as attempt 1, due at
// p.now, with a fresh schedule-to-close budget; its heartbeat details stay,
// so a resumable activity continues from its last checkpoint. With an edit,
// the patch goes onto the options the workflow scheduled and what follows
// from them (the start-to-close default, max attempts) is derived again, as
// when it was scheduled. ActivityRedriven names who asked, why, what
// changed and the operation, if any. An activity that is not a dead letter
// is ErrNotDeadLettered.
func redriveLetter(a *durablev1.ActivityRecord, w *durablev1.WorkflowRecord, p redriveParams, env *ruleEnv) (step, error) {
	in := a.GetInfo()
	if in.GetState() != stateDead {
		return step{}, ErrNotDeadLettered
	}
	now := p.now
	if p.edit != nil {
		opts, _ := ApplyPatch(in.GetOptions(), p.edit)
		fillStartToClose(opts, env.Defaults.StartToClose)
		in.Options = opts
		in.MaxAttempts = maxAttemptsOf(opts, env.Defaults)
	}
	in.State = stateScheduled
	in.Attempt = 1
	in.ScheduledTime = ts(now)
	in.NextAttemptTime = ts(now)
	in.DeadLetteredTime = nil
	in.Redrives++
	in.RedrivenByOperation = p.operationID
	in.ExpirationTime = nil
	if stc := in.GetOptions().GetScheduleToCloseTimeout().AsDuration(); stc > 0 {
		in.ExpirationTime = ts(now.Add(stc))
	}
	a.Seq = env.Draw.NextID()
	w.Info.DeadLetters--
	s := step{Activity: a}
	s.record(w, now, &durablev1.HistoryEvent{
		Type: evActivityRedriven, ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType(),
		ScheduledEventId: a.GetScheduledEventId(), Principal: p.by.Principal, Reason: p.reason,
		Edit: cloneEdit(p.edit), OperationId: p.operationID,
	})
	s.queued(a, true, env)
	s.effect(effect{kind: effObserve, obs: observation{kind: obsRedriven, activityType: in.GetActivityType()}})
	return s, nil
}
