package engine

import (
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Work that waits hours (a retry's backoff, a schedule-to-close budget, a
// workflow timer) is most of what a busy daemon holds and none of what it
// does next. The engine therefore keeps in memory only what falls due
// before its horizon, about a WaitWindow ahead of now: the activity tasks
// of the queues, the timers of the windowed kinds, and the due times of
// the queues' books. What is due later lives only in the store's indexes,
// which are ordered by due time; a refill reads the next stretch from them
// when now comes within half a window of the horizon, so a refill happens
// once per half window, never once per poll, and a start reads the window
// rather than every record.
//
// The refill is a transition like any other (it reads, writes nothing):
// the batcher runs it in its transaction and publishes it in commit order.
// Every change published before it was seen by its read, and every change
// published after it meets the new horizon, so the books (and the counts
// of tasks beyond the window, derived from the activity counts) stay
// exact, and no entry falls between a read and a publish.
//
// What stays whole: workflow tasks (one per running workflow at most, due
// now), lease timers (one per attempt running) and, while any policy
// override is in force, every timer: an override moves timers away from
// where the store's index has them, so the index cannot refill them.

// DefaultWaitWindow is the default of Options.WaitWindow.
const DefaultWaitWindow = 2 * time.Minute

// windowedTimer reports whether timers of a kind are kept only within the
// window: those whose due time in the store's index is where they fire.
func windowedTimer(k TimerKind) bool {
	return k == ScheduleToStartTimer || k == ScheduleToCloseTimer || k == UserTimer
}

// keepTimer is the rule of what timer the engine holds in memory, given its
// horizon and whether any policy override is in force.
func keepTimer(t Timer, horizon time.Time, overrides bool) bool {
	return !windowedTimer(t.Kind) || overrides || t.Due.Before(horizon)
}

// keepEntry is the rule of what queue entry the engine holds in memory.
func keepEntry(kind TaskKind, due, horizon time.Time) bool {
	return kind != ActivityTask || due.Before(horizon)
}

// refillDue reports whether the window must move on: now is within half a
// window of the horizon.
func refillDue(now, horizon time.Time, window time.Duration) bool {
	return !now.Add(window / 2).Before(horizon)
}

// refillAt is when the window must move on next.
func refillAt(horizon time.Time, window time.Duration) time.Time {
	return horizon.Add(-window / 2)
}

// refill is what a refill read: the window's next stretch, from the old
// horizon up to until.
type refill struct {
	until   time.Time
	entries []QueueEntry
	timers  []Timer
}

// ensureHorizon moves the window on if now has come within half a window
// of the horizon. Callers are the ones that fire due timers: polls, the
// timer loop and reads.
func (e *Engine) ensureHorizon() error {
	window := e.opts.WaitWindow
	e.mu.Lock()
	now, horizon := e.now(), e.horizon
	e.mu.Unlock()
	if !refillDue(now, horizon, window) {
		return nil
	}
	e.refilling.Lock()
	defer e.refilling.Unlock()
	e.mu.Lock()
	horizon = e.horizon
	e.mu.Unlock()
	if !refillDue(now, horizon, window) {
		return nil // another caller moved it meanwhile
	}
	until := now.Add(window)
	return e.update(func(tx Tx, c *change) error {
		f, err := readWindow(tx, TimeRange{From: horizon, Before: until})
		c.refill = f
		return err
	})
}

// readWindow reads the activity tasks and windowed timers due within r.
func readWindow(tx Tx, r TimeRange) (*refill, error) {
	f := &refill{until: r.Before}
	err := tx.QueuedIn(ActivityTask, r, func(q QueueEntry) bool {
		f.entries = append(f.entries, q)
		return true
	})
	if err != nil {
		return nil, err
	}
	err = tx.TimersIn(r, func(t Timer) bool {
		if windowedTimer(t.Kind) {
			f.timers = append(f.timers, t)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// applyRefillLocked publishes a refill: the horizon moves to its end, its
// entries join the queues and the books, its timers the timer set (unless
// one of the same kind and ids is there: an override put it where it is),
// and the polls parked on its queues look again.
func (e *Engine) applyRefillLocked(f *refill) {
	if f.until.After(e.horizon) {
		e.horizon = f.until
	}
	woken := map[queueKey]bool{}
	for _, q := range f.entries {
		e.pushEntryLocked(q)
		e.bookLocked([]taskMove{{kind: ActivityTask, workflowID: q.WorkflowID, activityID: q.ActivityID, to: taskSpot{queue: q.Queue, queued: true, due: q.Due}}})
		if k := (queueKey{q.Kind, q.Queue}); !woken[k] {
			woken[k] = true
			e.wakeLocked(k, -1)
		}
	}
	for _, t := range f.timers {
		e.timers.restore(t)
	}
	if len(f.timers) > 0 {
		select {
		case e.timerWake <- struct{}{}:
		default:
		}
	}
}

// setTimerLocked sets a timer the engine keeps in memory, or forgets one
// that falls beyond the window (the store's index holds it).
func (e *Engine) setTimerLocked(t Timer) {
	if keepTimer(t, e.horizon, len(e.overrideTable()) > 0) {
		e.timers.set(t)
		return
	}
	e.timers.remove(t.Kind, t.WorkflowID, t.ID)
}

// queuedBeyondLocked is how many activity tasks each queue holds beyond the
// window: its scheduled and retrying activities less those in its books.
func (e *Engine) queuedBeyondLocked() map[string]int {
	out := map[string]int{}
	for k, n := range e.counts {
		if k.state == stateScheduled || k.state == stateRetrying {
			out[k.queue] += n
		}
	}
	for name, b := range e.books {
		if _, ok := out[name]; ok {
			out[name] -= len(b.queued[ActivityTask])
		}
	}
	for name, n := range out {
		if n <= 0 {
			delete(out, name)
		}
	}
	return out
}

// rebuildIndex loads at start what the engine keeps in memory: the
// activity counts (kept by the store), the window (activity tasks and
// windowed timers due before the horizon), and whole what is not
// windowed: running attempts with their lease timers, the tasks and
// leases of running workflows, and the timers of activities whose type
// has an override. It reads every record only from a store that keeps no
// counts (a read-only one written by an older release).
func (e *Engine) rebuildIndex(tx Tx) error {
	e.horizon = e.now().Add(e.opts.WaitWindow)
	kept, err := tx.ActivityCounts(func(queue string, state durablev1.ActivityState, n int64) bool {
		e.counts[stateKey{queue: queue, state: state}] += int(n)
		return true
	})
	if err != nil {
		return err
	}
	if !kept {
		err := tx.ScanActivities(func(a *durablev1.ActivityRecord) bool {
			e.counts[countKey(a)]++
			return true
		})
		if err != nil {
			return err
		}
	}
	_, err = tx.ActivitiesByState(StateRange{State: stateStarted}, nil, func(a *durablev1.ActivityRecord) bool {
		e.bookLocked([]taskMove{{kind: ActivityTask, workflowID: a.GetInfo().GetWorkflowId(), activityID: a.GetInfo().GetActivityId(), to: activitySpot(a)}})
		for _, t := range e.timersOf(a) {
			e.timers.set(t)
		}
		return true
	})
	if err != nil {
		return err
	}
	types := map[string]bool{}
	for k := range e.overrideTable() {
		types[k.activityType] = true
	}
	for typ := range types {
		for _, state := range []durablev1.ActivityState{stateScheduled, stateRetrying} {
			_, err := tx.ActivitiesByState(StateRange{State: state, ActivityType: typ}, nil, func(a *durablev1.ActivityRecord) bool {
				for _, t := range e.timersOf(a) {
					e.timers.set(t)
				}
				return true
			})
			if err != nil {
				return err
			}
		}
	}
	err = tx.RunningWorkflows(func(w *durablev1.WorkflowRecord) bool {
		if q, ok := WorkflowQueueEntryOf(w); ok {
			e.pushEntryLocked(q)
		}
		e.bookLocked([]taskMove{{kind: WorkflowTask, workflowID: w.GetInfo().GetWorkflowId(), to: workflowSpot(w)}})
		for _, t := range WorkflowTimersOf(w) {
			e.timers.set(t)
		}
		return true
	})
	if err != nil {
		return err
	}
	f, err := readWindow(tx, TimeRange{Before: e.horizon})
	if err != nil {
		return err
	}
	e.applyRefillLocked(f)
	return nil
}
