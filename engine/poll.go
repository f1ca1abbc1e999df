package engine

import (
	"context"
	"errors"
	"time"
)

type queueKey struct {
	kind  TaskKind
	queue string
}

// waiter is one long poll parked on a queue.
type waiter struct {
	ch chan struct{} // closed when the poll should look again
}

// A task queued for later (a retry's backoff) must reach a parked poll when
// it falls due. The queue has one alarm for that, at the due time of its
// earliest entry not yet due, which wakes as many parked polls as there are
// entries due, oldest poll first, and sets itself again for the next entry
// if polls are left parked. Polls therefore keep no timer of their own, and
// a task queued for later wakes nobody when it is published: with a timer
// in every poll, each retry woke every parked poll twice (when it was
// queued, to look at the new due time, and when it fell due), and on a
// busy machine the crowd of runnable goroutines is what made the hand-out
// late.

// armLocked makes sure the queue's alarm rings at due or before. An alarm
// set for later stays set; it rings for nothing (see alarm).
func (e *Engine) armLocked(k queueKey, due time.Time) {
	if at, ok := e.alarms[k]; ok && !at.After(due) {
		return
	}
	e.alarms[k] = due
	go e.alarm(k, due)
}

// alarm waits until due and rings the queue's alarm, unless an earlier
// alarm has taken its place (that one rings first and sets the next).
func (e *Engine) alarm(k queueKey, due time.Time) {
	select {
	case <-e.clock.After(due.Sub(e.now())):
	case <-e.closeCh:
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if at, ok := e.alarms[k]; !ok || !at.Equal(due) {
		return
	}
	delete(e.alarms, k)
	e.rt.ringLocked(k, e.now())
}

// ringHeapLocked wakes a parked poll for each entry of the queue due at now,
// and sets the alarm for the earliest entry not yet due if polls stay
// parked.
func (e *Engine) ringHeapLocked(k queueKey, now time.Time) {
	parked := len(e.waiters[k])
	if parked == 0 {
		return // the next poll to park sets the alarm (longPoll)
	}
	var h entryHeap
	if q := e.queues[k]; q != nil {
		h = *q
	}
	n, next := dueAmong(h, now, parked)
	e.wakeLocked(k, n)
	if n < parked && !next.IsZero() {
		e.armLocked(k, next)
	}
}

// dueAmong counts the entries of heap h due at now, up to limit, and
// returns the due time of the earliest entry not yet due when it counted
// them all (zero when there is none, or when it stopped at limit). The
// entries due form the top of the heap, so it visits only them and the
// entries just below: the cost is the number due, at most limit.
func dueAmong(h entryHeap, now time.Time, limit int) (n int, next time.Time) {
	stack := []int{0}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i >= len(h) {
			continue
		}
		if h[i].Due.After(now) {
			if next.IsZero() || h[i].Due.Before(next) {
				next = h[i].Due
			}
			continue
		}
		if n++; n == limit {
			return n, time.Time{}
		}
		stack = append(stack, 2*i+1, 2*i+2)
	}
	return n, next
}

// wakeLocked wakes up to n parked polls of a queue (all of them when n < 0),
// oldest first, so a task scheduled while workers wait goes to one at once.
func (e *Engine) wakeLocked(k queueKey, n int) {
	ws := e.waiters[k]
	if n < 0 || n > len(ws) {
		n = len(ws)
	}
	for _, w := range ws[:n] {
		close(w.ch)
	}
	if n == len(ws) {
		delete(e.waiters, k)
		return
	}
	e.waiters[k] = append(ws[:0:0], ws[n:]...)
}

func (e *Engine) removeWaiterLocked(k queueKey, w *waiter) bool {
	ws := e.waiters[k]
	for i, x := range ws {
		if x == w {
			e.waiters[k] = append(ws[:i:i], ws[i+1:]...)
			return true
		}
	}
	return false
}

// dropWaiter takes w off its queue. If a wake-up already reached it, the
// wake-up is passed on: this poll will not look again, and the task it was
// for must not wait for another poll's timeout.
func (e *Engine) dropWaiter(k queueKey, w *waiter) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.removeWaiterLocked(k, w) {
		e.wakeLocked(k, 1)
	}
}

// longPoll calls take until it returns true, the poll times out, ctx ends or
// the engine closes. take runs without the engine's mutex; it also reports
// the due time of the earliest entry that is not yet due, for which the
// poll sets the queue's alarm before it parks. The poll is registered as a
// waiter before take looks, so a task queued while take runs wakes it; the
// poll counts as a poller of identity on the queue while it runs. A ctx that
// is already done makes longPoll try exactly once.
func (e *Engine) longPoll(ctx context.Context, k queueKey, identity string, take func(now time.Time) (bool, time.Time, error)) error {
	defer e.pollStarted(k, identity)()
	limit := e.clock.After(e.opts.PollTimeout)
	for {
		if err := e.fireDue(); err != nil && !refused(err) {
			return ignoreClosed(err)
		}
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil
		}
		w := &waiter{ch: make(chan struct{})}
		e.waiters[k] = append(e.waiters[k], w)
		e.mu.Unlock()

		now := e.now()
		ok, next, err := take(now)
		if err != nil || ok || ctx.Err() != nil {
			e.dropWaiter(k, w)
			return ignoreClosed(err)
		}
		if !next.IsZero() {
			e.mu.Lock()
			e.armLocked(k, next)
			e.mu.Unlock()
		}
		select {
		case <-w.ch:
			continue
		case <-limit:
			limit = nil
		case <-ctx.Done():
		case <-e.closeCh:
		}
		e.dropWaiter(k, w)
		if ctx.Err() != nil {
			return nil // nobody would receive a task leased now
		}
		if limit == nil {
			// One last look, so a task that arrived with the timeout is not
			// left waiting for the next poll.
			_, _, err := take(e.now())
			return ignoreClosed(err)
		}
	}
}

// ignoreClosed turns ErrClosed into an empty poll: a daemon shutting down
// answers its long polls with nothing.
func ignoreClosed(err error) error {
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}
