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
// the due time of the earliest entry that is not yet due, so the poll wakes
// for it. The poll is registered as a waiter before take looks, so a task
// queued while take runs wakes it; the poll counts as a poller of identity
// on the queue while it runs. A ctx that is already done makes longPoll
// try exactly once.
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
		var due <-chan time.Time
		if !next.IsZero() {
			due = e.clock.After(next.Sub(now))
		}
		select {
		case <-w.ch:
			continue
		case <-due:
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
