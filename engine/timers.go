package engine

import (
	"errors"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// timerBatch bounds how many due timers one transaction handles.
const timerBatch = 128

// timerLoop fires timers as they come due on the engine's clock. Polls also
// fire due timers before they look at a queue, so a fake clock needs no loop.
func (e *Engine) timerLoop() {
	defer close(e.loopDone)
	for {
		e.mu.Lock()
		now := e.now()
		if err := e.fireDueLocked(now); err != nil && !errors.Is(err, ErrClosed) {
			e.opts.Logger.Error("firing timers", "err", err)
		}
		next := e.nextTimer
		e.mu.Unlock()

		var due <-chan time.Time
		if !next.IsZero() {
			due = e.clock.After(next.Sub(now))
		}
		select {
		case <-e.closeCh:
			return
		case <-e.timerWake:
		case <-due:
		}
	}
}

// fireDueLocked handles every timer due at now: expired leases become
// retryable timeout failures, budgets that ran out dead-letter, workflow
// timers fire. Timer effects are not synced: after a crash they are derived
// again from the records and fire again.
func (e *Engine) fireDueLocked(now time.Time) error {
	for rounds := 0; !e.nextTimer.IsZero() && !e.nextTimer.After(now); rounds++ {
		if rounds == 10000 {
			// Every fired timer changes its record, which moves its index
			// entry; getting here means an entry no record explains.
			e.opts.Logger.Error("timer index does not drain; retrying in a second", "due", e.nextTimer)
			e.nextTimer = now.Add(time.Second)
			return nil
		}
		var next time.Time
		err := e.updateLocked(func(tx Tx, c *change) error {
			timers, err := tx.DueTimers(timerBatch)
			if err != nil {
				return err
			}
			next = time.Time{}
			for _, t := range timers {
				if t.Due.After(now) {
					next = t.Due
					return nil
				}
				if err := e.fire(tx, c, t, now); err != nil {
					return err
				}
			}
			if len(timers) == timerBatch {
				next = now // more may be due: look again
			} else {
				ts, err := tx.DueTimers(1)
				if err != nil {
					return err
				}
				if len(ts) > 0 {
					next = ts[0].Due
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		e.nextTimer = next
	}
	return nil
}

func (e *Engine) fire(tx Tx, c *change, t Timer, now time.Time) error {
	switch t.Kind {
	case UserTimer:
		return e.fireUserTimer(tx, c, t, now)
	case WorkflowTaskLeaseTimer:
		w, err := tx.GetWorkflow(t.WorkflowID)
		if err != nil {
			return ignoreNotFound(err)
		}
		if w.GetWtState() != wtStarted || w.GetWtDeadline().AsTime().After(now) {
			return nil
		}
		e.retryWorkflowTask(c, w, now)
		if err := tx.PutWorkflow(w); err != nil {
			return err
		}
		c.workflow(w)
		return nil
	}
	a, err := tx.GetActivity(t.WorkflowID, t.ID)
	if err != nil {
		return ignoreNotFound(err)
	}
	in := a.GetInfo()
	// The attempt ended at its deadline, however late the engine noticed
	// (after a restart, say): the backoff counts from then.
	now = t.Due
	switch t.Kind {
	case ActivityLeaseTimer:
		deadline, why := LeaseDeadline(in)
		if in.GetState() != stateStarted || deadline.After(now) {
			return tx.PutActivity(a) // rewrite the index to the current deadline
		}
		if why == TimeoutScheduleToClose {
			return e.expire(tx, c, a, now)
		}
		msg := "the attempt did not finish within its start-to-close timeout of " + in.GetOptions().GetStartToCloseTimeout().AsDuration().String()
		if why == TimeoutHeartbeat {
			msg = "no heartbeat within the heartbeat timeout of " + in.GetOptions().GetHeartbeatTimeout().AsDuration().String()
		}
		return e.failAttempt(tx, c, a, &durablev1.Failure{Type: why, Message: msg}, now)
	case ScheduleToStartTimer:
		if in.GetState() != stateScheduled && in.GetState() != stateRetrying {
			return nil
		}
		w, err := tx.GetWorkflow(t.WorkflowID)
		if err != nil {
			return err
		}
		return e.deadLetter(tx, c, w, a, &durablev1.Failure{
			Type:    TimeoutScheduleToStart,
			Message: "no worker picked the attempt up within its schedule-to-start timeout of " + in.GetOptions().GetScheduleToStartTimeout().AsDuration().String(),
		}, now)
	case ScheduleToCloseTimer:
		if in.GetState() == stateDead || in.GetExpirationTime().AsTime().After(now) {
			return nil
		}
		return e.expire(tx, c, a, now)
	}
	return nil
}

// expire dead-letters an activity whose schedule-to-close budget ran out,
// ending its running attempt if it has one.
func (e *Engine) expire(tx Tx, c *change, a *durablev1.ActivityRecord, now time.Time) error {
	in := a.GetInfo()
	f := &durablev1.Failure{
		Type:    TimeoutScheduleToClose,
		Message: "the activity's schedule-to-close budget of " + in.GetOptions().GetScheduleToCloseTimeout().AsDuration().String() + " ran out",
	}
	e.endAttempt(tx, in, now, f)
	w, err := tx.GetWorkflow(in.GetWorkflowId())
	if err != nil {
		return err
	}
	return e.deadLetter(tx, c, w, a, f, now)
}

func (e *Engine) fireUserTimer(tx Tx, c *change, t Timer, now time.Time) error {
	if _, err := tx.GetTimer(t.WorkflowID, t.ID); err != nil {
		return ignoreNotFound(err)
	}
	if err := tx.DeleteTimer(t.WorkflowID, t.ID); err != nil {
		return err
	}
	w, err := tx.GetWorkflow(t.WorkflowID)
	if err != nil {
		return ignoreNotFound(err)
	}
	if w.GetInfo().GetStatus() != statusRunning {
		return nil
	}
	e.appendEvents(tx, w, now, &durablev1.HistoryEvent{Type: evTimerFired, TimerId: t.ID})
	e.scheduleWorkflowTask(tx, c, w, now)
	if err := tx.PutWorkflow(w); err != nil {
		return err
	}
	c.workflow(w)
	return nil
}

func ignoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
