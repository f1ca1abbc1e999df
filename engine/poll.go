package engine

import (
	"context"
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

func (e *Engine) removeWaiterLocked(k queueKey, w *waiter) {
	ws := e.waiters[k]
	for i, x := range ws {
		if x == w {
			e.waiters[k] = append(ws[:i:i], ws[i+1:]...)
			return
		}
	}
}

// longPoll calls take under the engine's mutex until it returns true, the
// poll times out, ctx ends or the engine closes. take also reports the due
// time of the earliest entry that is not yet due, so the poll wakes for it.
// A ctx that is already done makes longPoll try exactly once.
func (e *Engine) longPoll(ctx context.Context, k queueKey, take func(now time.Time) (bool, time.Time, error)) error {
	limit := e.clock.After(e.opts.PollTimeout)
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil
		}
		now := e.now()
		if err := e.fireDueLocked(now); err != nil {
			e.mu.Unlock()
			return err
		}
		ok, next, err := take(now)
		if err != nil || ok {
			e.mu.Unlock()
			return err
		}
		if ctx.Err() != nil {
			e.mu.Unlock()
			return nil
		}
		w := &waiter{ch: make(chan struct{})}
		e.waiters[k] = append(e.waiters[k], w)
		e.mu.Unlock()

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
		e.mu.Lock()
		e.removeWaiterLocked(k, w)
		e.mu.Unlock()
		if ctx.Err() != nil {
			return nil // nobody would receive a task leased now
		}
		if limit == nil {
			// One last look, so a task that arrived with the timeout is not
			// left waiting for the next poll.
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.closed {
				return nil
			}
			_, _, err := take(e.now())
			return err
		}
	}
}
