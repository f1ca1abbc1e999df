package engine

// A task is handed out only once the transition that queued it is on disk
// (batch.go). Taking it need not wait that long. Were the task queued only
// after the sync, a poll would wake, submit its lease and wait for the
// lease's commit after the sync. On a round of one activity
// (BenchmarkActivityLatency) that happens twice, once for the activity
// and once for the workflow task that sees its result. So the batcher
// queues the tasks a batch makes due at once as soon as the batch commits,
// before its sync starts, and wakes a parked poll for each. The poll takes
// the task and its lease commits beside the sync (leaseDuringSync). The
// poll answers only once that sync has returned (awaitDurable). If the sync
// fails, the poll hands out nothing. The worker still gets nothing that a
// crash could take back: only taking the task moved ahead of the sync.
// Everything else a change shows (the task's books, timers, watchers,
// metrics) is still published after the sync, in commit order.
//
// The batcher does this only for a batch of one transition: an engine
// that quiet is where a round's latency is what counts. Under load, the
// polls woken ahead of the sync committed their leases in commits of their
// own instead of in the batch after the sync: in ActivityThroughput/Succeed
// (32 in flight) commits per activity rose from 0.24 to 0.27, calls from
// 1.32 to 1.34 and transitions from 1.30 to 1.33, for no gain there.
//
// A task taken this way whose sync then fails was leased in the store but
// never handed out. Writes are refused from then on (gate.go). After the
// restart its attempt is delivered again once its lease runs out, as for a
// poll whose caller went away after its lease.
//
// Only the embedded runtime does this (queuedAheadLocked): its queues are
// this engine's heaps. The shared runtime hands out what other nodes
// committed, and its store is durable at commit anyway.

// syncWait is a sync under way whose batch queued tasks ahead of it.
type syncWait struct {
	entries []QueueEntry
	done    chan struct{} // closed once the sync has returned
	err     error         // what the sync's callers got; set before done closes
}

// queueEarly queues the entries of the committed, unsynced changes that
// are due now and wakes a parked poll for each. It returns what the polls
// that take them wait for; nil when it queued none. Called by the batcher
// between a batch's commit and its sync; settle and forgetEarly end it.
func (e *Engine) queueEarly(pending []*change) *syncWait {
	var w *syncWait
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	for _, c := range pending {
		for _, q := range c.entries {
			if q.Due.After(now) || !e.rt.queuedAheadLocked(q) {
				continue // published after the sync, like the rest
			}
			if w == nil {
				w = &syncWait{done: make(chan struct{})}
			}
			w.entries = append(w.entries, q)
			e.early[q] = w
			e.wakeLocked(queueKey{q.Kind, q.Queue}, 1)
		}
	}
	return w
}

// queuedEarlyLocked reports whether q was queued ahead of a sync that has
// not returned, or that failed: publishing must not queue it again.
func (e *Engine) queuedEarlyLocked(q QueueEntry) bool {
	_, ok := e.early[q]
	return ok
}

// settle tells the polls that took tasks queued ahead of a sync how it
// went: err nil, and they may answer; else they hand out nothing. A good
// sync is settled by the goroutine that ran it, as soon as it returns, so
// that the polls answer while the batcher wakes and publishes the batch:
// what the worker gets is on disk, and what the publishing shows (books,
// timers, watchers) no worker needs first. A failed one is settled by the
// batcher once writes are refused.
func (w *syncWait) settle(err error) {
	if w == nil {
		return
	}
	w.err = err
	close(w.done)
}

// forgetEarly makes the entries queued ahead of a good sync ordinary queued
// tasks, once the batch is published (publishing skips them until then).
// Those of a failed sync stay marked: writes are refused until a restart,
// and a poll that takes one later must not hand it out either.
func (e *Engine) forgetEarly(w *syncWait) {
	if w == nil {
		return
	}
	e.mu.Lock()
	for _, q := range w.entries {
		delete(e.early, q)
	}
	e.mu.Unlock()
}

// awaitDurable returns once the transitions that queued entries are on
// disk: at once for tasks queued after their sync, else when the sync
// under way returns. It returns that sync's error: the leased tasks must
// then not be handed out.
func (e *Engine) awaitDurable(entries []QueueEntry) error {
	var w *syncWait
	e.mu.Lock()
	for _, q := range entries {
		if x := e.early[q]; x != nil {
			w = x
			break
		}
	}
	e.mu.Unlock()
	if w == nil {
		return nil
	}
	<-w.done
	return w.err
}
