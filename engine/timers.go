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
		// While writes are refused, timers wait (firing one is a write).
		if !e.waitWritable() {
			return
		}
		err := e.fireDue()
		if err != nil && !refused(err) && !errors.Is(err, ErrClosed) {
			e.opts.Logger.Error("firing timers", "err", err)
		}
		if !e.pauseAfter(err) {
			return
		}
		e.mu.Lock()
		now := e.now()
		next := e.rt.wakeAtLocked(now)
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

// fireDue handles every timer due now: expired leases become retryable
// timeout failures, budgets that ran out dead-letter, workflow timers fire.
// Nobody is told that a timer fired, but what it did (a retry queued, say) is
// published only after a sync, like any change a crash could take back; a
// timer whose effects a crash does take back is derived again from the
// records and fires again. When it returns, every timer due when it was
// called has fired and its effects are published, whoever popped it: a batch
// popped by another caller (the timer loop, say) is waited for, so a poll or
// a read that fires due timers first never misses what one of them did.
// While writes are refused it fires nothing and returns the refusal: reads
// and polls go on with the state as it is.
func (e *Engine) fireDue() error {
	if err := e.ensureHorizon(); err != nil {
		return err
	}
	for {
		if done, err := e.fireBatch(); done || err != nil {
			return err
		}
	}
}

// fireBatch fires up to timerBatch due timers in one transaction; done is
// true when none was due. firing is held from the pop until the effects are
// published.
func (e *Engine) fireBatch() (done bool, err error) {
	e.firing.Lock()
	defer e.firing.Unlock()
	if err := e.gate.err(); err != nil {
		return true, err
	}
	return e.rt.fireBatch()
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
		env := e.env(c)
		s := workflowTaskTimeout(w, t, &env)
		return e.applyStep(tx, c, &s)
	}
	a, err := tx.GetActivity(t.WorkflowID, t.ID)
	if err != nil {
		return ignoreNotFound(err)
	}
	// Timers are checked against the record under the policy in force
	// (activityTimerVerdict); what fires counts from its own due time,
	// however late the engine noticed (after a restart, say).
	env := e.env(c)
	v := activityTimerVerdict(a, t, &env)
	var w *durablev1.WorkflowRecord
	switch v.kind {
	case verdictNone:
		return nil
	case verdictLeaseExpired, verdictNeverStarted, verdictBudgetSpent:
		if w, err = tx.GetWorkflow(t.WorkflowID); err != nil {
			return err
		}
	}
	s := fireActivityTimer(a, w, t, v, &env)
	return e.applyStep(tx, c, &s)
}

func (e *Engine) fireUserTimer(tx Tx, c *change, t Timer, now time.Time) error {
	rec, err := tx.GetTimer(t.WorkflowID, t.ID)
	if err != nil {
		return ignoreNotFound(err)
	}
	w, err := tx.GetWorkflow(t.WorkflowID)
	if errors.Is(err, ErrNotFound) {
		w = nil // the timer goes all the same
	} else if err != nil {
		return err
	}
	env := e.env(c)
	s := fireUserTimer(rec, w, t, now, &env)
	return e.applyStep(tx, c, &s)
}

func ignoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
