package engine

import (
	"fmt"
	"time"
)

// The runtime's half of a transition: what a rule decided (a step, see
// rules.go) reaches the store and the change here, and nowhere else.

// env is the ruleEnv of a transition collecting its changes in c: the
// overrides in force now, the engine's settings, and c's drawer (the
// engine's jitter generator and id sequence), kept in c so that building an
// env allocates nothing.
func (e *Engine) env(c *change) ruleEnv {
	c.draw = engineDraw{e: e, c: c}
	return ruleEnv{
		Overrides:           e.overrideTable(),
		Defaults:            e.policyDefaults(),
		MaxAttemptRecords:   e.opts.MaxAttemptRecords,
		WorkflowTaskTimeout: e.opts.WorkflowTaskTimeout,
		Draw:                &c.draw,
	}
}

// engineDraw is the drawer of the rules run for change c: the engine's
// seeded jitter generator, its id sequence (which notes in c that an id was
// used), and the operating system's CSPRNG for lease ids.
type engineDraw struct {
	e *Engine
	c *change
}

func (d *engineDraw) Jitter(b time.Duration) time.Duration { return d.e.jitter(b) }
func (d *engineDraw) NextID() int64                        { return d.e.nextID(d.c) }
func (d *engineDraw) LeaseID() int64                       { return newLeaseID() }

// applyStep writes a step and does its effects, in one order: the history, the
// step's activity (unless it finishes), the activities and timers it
// created, the effects in the order the rule gave them, the workflow last.
func (e *Engine) applyStep(tx Tx, c *change, s *step) error {
	if len(s.Events) > 0 {
		id := s.Workflow.GetInfo().GetWorkflowId()
		if err := tx.AppendEvents(id, s.Events); err != nil {
			return fmt.Errorf("append history of workflow %q: %w", id, err)
		}
	}
	if a := s.Activity; a != nil && !s.finishes() {
		if err := tx.PutActivity(a); err != nil {
			return err
		}
		c.upsert(a.GetInfo())
	}
	for _, a := range s.Scheduled {
		if err := tx.PutActivity(a); err != nil {
			return err
		}
		if err := rememberOptions(tx, a.GetInfo()); err != nil {
			return err
		}
		c.upsert(a.GetInfo())
	}
	for _, t := range s.Timers {
		if err := tx.PutTimer(t); err != nil {
			return err
		}
		c.addTimer(UserTimerOf(t))
	}
	for i := range s.Effects {
		if err := e.do(tx, c, s, &s.Effects[i]); err != nil {
			return err
		}
	}
	if w := s.Workflow; w != nil {
		if err := tx.PutWorkflow(w); err != nil {
			return err
		}
		c.workflow(w)
	}
	return nil
}

func (s *step) finishes() bool {
	for i := range s.Effects {
		if s.Effects[i].kind == effFinish {
			return true
		}
	}
	return false
}

// do carries out one effect of s.
func (e *Engine) do(tx Tx, c *change, s *step, ef *effect) error {
	switch ef.kind {
	case effEnqueue:
		c.enqueue(ef.entry)
	case effSetTimer:
		c.addTimer(ef.timer)
	case effTimerMovedLater:
		return e.rt.timerMovedLater(tx, c, ef.timer, ef.timer.Due)
	case effDropTimers:
		in := s.Activity.GetInfo()
		c.dropTimers(in.GetWorkflowId(), in.GetActivityId())
	case effObserve:
		c.observe(ef.obs)
	case effAttemptEnded:
		c.latency = append(c.latency, latencySample{activityType: ef.obs.activityType, at: ef.at, d: ef.obs.d, failed: ef.failed})
		c.observe(ef.obs)
	case effFinish:
		in := s.Activity.GetInfo()
		if err := keepFinished(tx, s.Activity, ef.outcome, ef.at); err != nil {
			return err
		}
		if err := tx.DeleteActivity(in.GetWorkflowId(), in.GetActivityId()); err != nil {
			return err
		}
		c.remove(in.GetWorkflowId(), in.GetActivityId())
	case effDeadLettered:
		in := s.Activity.GetInfo()
		if ef.operation != "" {
			if err := e.countReDeadLetter(tx, c, ef.operation); err != nil {
				return err
			}
		}
		c.observe(observation{kind: obsDeadLettered, activityType: in.GetActivityType()})
		e.opts.Logger.Warn("activity dead-lettered", "workflow_id", in.GetWorkflowId(), "activity_id", in.GetActivityId(),
			"activity_type", in.GetActivityType(), "attempts", in.GetAttempt(), "failure_type", ef.failure.GetType())
	case effDeleteTimer:
		return tx.DeleteTimer(ef.timer.WorkflowID, ef.timer.ID)
	case effCloseWorkflow:
		return e.dropPending(tx, c, s.Workflow.GetInfo().GetWorkflowId(), ef.at)
	default:
		return fmt.Errorf("a rule asked for effect %d, which the runtime does not know", ef.kind)
	}
	return nil
}

// dropPending drops what a workflow that closed at at left pending: its
// activities (dead letters included), kept as finished with their attempt
// trail. Its workflow timers stay: one that fires finds the workflow closed
// and only goes.
func (e *Engine) dropPending(tx Tx, c *change, id string, at time.Time) error {
	acts, err := tx.Activities(id)
	if err != nil {
		return err
	}
	for _, a := range acts {
		if err := keepFinished(tx, a, FinishedWorkflowClosed, at); err != nil {
			return err
		}
		if err := tx.DeleteActivity(id, a.GetInfo().GetActivityId()); err != nil {
			return err
		}
		c.remove(id, a.GetInfo().GetActivityId())
	}
	c.closed = append(c.closed, id)
	return nil
}
