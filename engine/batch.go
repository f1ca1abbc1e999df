package engine

import (
	"errors"
	"time"
)

// maxBatch bounds how many transitions share one store transaction.
const maxBatch = 256

// What a committed transition changed reaches the world outside the store
// (published) only once the store has synced it: its queue entries are
// pushed to the queue heaps and wake parked polls, its timers are set, the
// callers waiting for a workflow to close are told, watchers hear it, metrics
// and the audit log count it. So no worker is handed a task, and no watcher
// or waiting client shown a state, that a crash of the machine could take
// back. Two things do not wait for the disk:
//
//   - A lease hand-out (a poll taking a task) is answered at commit, and what
//     it changed (the attempt started, its lease timer) is published at once,
//     or after the sync of a change committed before it. A lease lost in a
//     crash is a redelivery, which the idempotency key covers; waiting for
//     the disk would add an fsync to every poll. Nor does a lease wait for a
//     sync under way: it commits beside it (leaseDuringSync).
//   - A task due at once is queued at commit, and a poll may take it and
//     commit its lease while the sync runs; the poll answers only after the
//     sync has returned (handout.go).
//   - Reads (describe, lists, a Watch snapshot) read the store, which holds
//     committed transitions: they may show one that the sync under way has
//     not finished.
//
// A change that shows nothing outside the engine (a janitor's deletes, a
// timer found stale, timers alone: a timer only starts a transition, which is
// published after its own sync) needs no sync and is published at commit.
// A sync that fails publishes nothing of what it covered: writes are refused
// from then on (gate.go), and the restart that lifts the refusal rebuilds
// the queues and timers from what the store recovered.
//
// Publishing runs on the batcher's goroutine between batches and takes only
// the engine's mutex, which no one holds while waiting for the batcher.

// requestKind says when a transition is answered and when what it changed is
// published.
type requestKind uint8

const (
	// kindCommit: acknowledged to a caller as durable. Answered after the
	// sync that covers it, once its change is published.
	kindCommit requestKind = iota
	// kindUpdate: acknowledged to nobody (timers firing, janitors, the
	// releaser's bookkeeping). Its change is published after a sync when it
	// shows anything, at commit otherwise; it is answered once published,
	// so whoever fires a timer and then polls sees what the timer did.
	kindUpdate
	// kindLease: a lease hand-out. Answered at commit; published at once,
	// or after the sync of a change before it in its batch.
	kindLease
)

// request is one state transition waiting for the batcher.
type request struct {
	fn   func(tx Tx, c *change) error
	kind requestKind
	// reads are records fn will read, read ahead by a store that can
	// (prefetch.go); a hint, not a limit.
	reads  []RecordKey
	change *change // what it changed, once committed
	err    error
	done   chan struct{}
}

// waits reports whether the request is answered only after a sync.
func (r *request) waits() bool {
	if r.err != nil || r.change == nil {
		return false
	}
	return r.kind == kindCommit || r.kind == kindUpdate && r.change.shown()
}

// errAbortBatch makes the store discard a batch in which one transition
// failed, so the failure leaves no partial writes behind.
var errAbortBatch = errors.New("abort batch")

// update runs fn as a state transition: it is applied by the batcher, in one
// store transaction with whatever other transitions are waiting, in the order
// they arrived, each seeing the writes of those before it. It returns fn's
// error, or the store's, once what fn changed is published: after a sync if
// it shows anything outside the engine.
func (e *Engine) update(fn func(tx Tx, c *change) error) error { return e.submit(fn, kindUpdate, nil) }

// commit is update that always returns after a sync: the caller may
// acknowledge after it.
func (e *Engine) commit(fn func(tx Tx, c *change) error) error { return e.submit(fn, kindCommit, nil) }

// commitReading is commit for a transition that will read the records
// reads names (prefetch.go).
func (e *Engine) commitReading(reads []RecordKey, fn func(tx Tx, c *change) error) error {
	return e.submit(fn, kindCommit, reads)
}

// lease is update for a lease hand-out: it returns at commit, without
// waiting for the disk.
func (e *Engine) lease(fn func(tx Tx, c *change) error) error { return e.submit(fn, kindLease, nil) }

func (e *Engine) submit(fn func(tx Tx, c *change) error, kind requestKind, reads []RecordKey) error {
	r := &request{fn: fn, kind: kind, reads: reads, done: make(chan struct{})}
	select {
	case e.requests <- r:
	case <-e.closeCh:
		return ErrClosed
	}
	<-r.done
	return r.err
}

// batcher applies transitions. Taking every transition that is waiting into
// one store transaction turns the store's per-commit cost (a write to its log
// and a hand-off to its writer) into a per-batch cost, which is what lets one
// serialized state machine keep up with many workers. The batcher also runs
// the syncs, after the batches that need one: the transitions that arrive
// during a sync make the next batch, and the batches grow with the load
// (group commit). Only leases, which need no sync, are committed while one
// runs (leaseDuringSync). Committing every transition beside the syncs was
// measured and did not pay: the batches got smaller and the CPU per
// activity rose by a tenth.
func (e *Engine) batcher() {
	defer close(e.batcherDone)
	for {
		// The transitions kept back during the last sync come first, in
		// the order they arrived (leaseDuringSync).
		batch := e.keptBack
		e.keptBack = nil
		if len(batch) == 0 {
			select {
			case first := <-e.requests:
				batch = []*request{first}
			case <-e.closeCh:
				return
			}
		}
	gather:
		for len(batch) < maxBatch {
			select {
			case r := <-e.requests:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		e.apply(batch)
		e.finish(batch)
	}
}

// finish publishes what a committed batch changed and answers its callers.
// Changes are published in commit order. Those before the first change that
// waits for a sync go at once, and so do the failed transitions and the
// leases and updates that need no sync; the rest go after one shared sync.
// When that sync fails, nothing more is published: the changes may not be on
// disk, the write gate closes until a restart recovers the store from its
// log (gate.go), and the callers that waited for the sync get the refusal.
func (e *Engine) finish(batch []*request) {
	defer e.releasePublishing()
	i := 0
	for i < len(batch) && !batch[i].waits() {
		i++
	}
	e.publish(changesOf(batch[:i]))
	for _, r := range batch[:i] {
		close(r.done)
	}
	var pending []*change
	var waiting []*request
	for _, r := range batch[i:] {
		if r.change != nil {
			pending = append(pending, r.change)
		}
		if r.waits() {
			waiting = append(waiting, r)
			continue
		}
		close(r.done)
	}
	if len(pending) == 0 {
		return
	}
	// Only a batch of one: see handout.go.
	var early *syncWait
	if len(batch) == 1 {
		early = e.queueEarly(pending)
	}
	synced := make(chan syncResult, 1)
	go func() {
		began := e.now()
		err := e.store.Sync()
		synced <- syncResult{err: err, took: e.now().Sub(began)}
		if err == nil {
			// The polls that took tasks of the batch answer from here,
			// without waiting for the batcher to publish first
			// (handout.go). Told after the batcher, they are the
			// goroutines the scheduler runs next.
			early.settle(nil)
		}
	}()
	leased, res := e.leaseDuringSync(synced)
	err := res.err
	if err == nil {
		e.opts.Observer.Synced(res.took)
		e.publish(append(pending, leased...))
		e.forgetEarly(early)
	} else {
		err = e.syncFailed(err)
		early.settle(err)
	}
	for _, r := range waiting {
		r.err = err
		close(r.done)
	}
}

// syncResult is what a sync returned and how long it took.
type syncResult struct {
	err  error
	took time.Duration
}

// leaseDuringSync runs while the store syncs a batch, until the sync
// returns. A lease hand-out needs no sync (see the top of this file), so a
// poll that arrives meanwhile is not made to wait for the disk: the leases
// waiting are committed in a batch of their own and answered at once, and
// their changes are returned, to be published after those the sync covers
// (commit order). Every other transition is kept back, in arrival order, for
// the first batch after the sync (e.keptBack), where it would have gone had
// the batcher waited: the transitions that wait for a sync still group
// while one runs, and a retry due while the disk is busy is handed out
// without waiting for it (issue 12's retry lateness).
//
// A sync runs beside a commit only on a store whose barrier covers exactly
// what committed before it began (Store.Sync's contract); a lease that
// commits while it runs is covered by the next one, or by none, which a
// lease does not need.
func (e *Engine) leaseDuringSync(synced <-chan syncResult) (leased []*change, res syncResult) {
	requests := e.requests
	keep := func(r *request) {
		e.keptBack = append(e.keptBack, r)
		if len(e.keptBack) >= maxBatch {
			requests = nil // the next batch is full: take no more
		}
	}
	for {
		select {
		case res = <-synced:
			return leased, res
		case r := <-requests:
			if r.kind != kindLease {
				keep(r)
				continue
			}
			leases := []*request{r}
		gather:
			for requests != nil && len(leases) < maxBatch {
				select {
				case r := <-requests:
					if r.kind == kindLease {
						leases = append(leases, r)
					} else {
						keep(r)
					}
				default:
					break gather
				}
			}
			e.apply(leases)
			for _, r := range leases {
				if r.change != nil {
					leased = append(leased, r.change)
				}
				close(r.done)
			}
		}
	}
}

// releasePublishing lets Watch fix its view again, once the batch that
// took publishing (try) is published or never will be.
func (e *Engine) releasePublishing() {
	if e.publishHeld {
		e.publishHeld = false
		e.publishing.Unlock()
	}
}

func changesOf(batch []*request) []*change {
	var out []*change
	for _, r := range batch {
		if r.change != nil {
			out = append(out, r.change)
		}
	}
	return out
}

// publish makes committed changes visible, in order: to polls, timers,
// close waiters and watchers under the mutex, then to the Observer and the
// audit log.
func (e *Engine) publish(changes []*change) {
	if len(changes) == 0 {
		return
	}
	e.mu.Lock()
	for _, c := range changes {
		e.publishChangeLocked(c)
	}
	e.mu.Unlock()
	for _, c := range changes {
		report(e.opts.Observer, c)
		e.logAudits(c)
	}
}

// apply applies a batch. When a transition fails, the transaction is
// discarded; the transitions before it are applied again without it, and it
// runs alone so its error (and nothing else of it) is what its caller sees.
// While writes are refused (gate.go) the batch fails whole before anything
// of it reaches the store; so does a batch whose commit the store refused.
func (e *Engine) apply(batch []*request) {
	for len(batch) > 0 {
		e.mu.Lock()
		closed := e.closed
		e.mu.Unlock()
		stop := e.gate.err()
		if closed {
			stop = ErrClosed
		}
		if stop != nil {
			for _, r := range batch {
				r.err = stop
			}
			return
		}
		n, err := e.try(batch)
		switch {
		case n == len(batch):
			return
		case !errors.Is(err, errAbortBatch):
			// The store's commit failed: the batch fails whole.
			err = e.storeFailed(err)
			for _, r := range batch {
				r.err = err
			}
			return
		}
		if n > 0 {
			e.apply(batch[:n])
		}
		if _, err := e.try(batch[n : n+1]); !errors.Is(err, errAbortBatch) && err != nil {
			batch[n].err = e.storeFailed(err)
		}
		batch = batch[n+1:]
	}
}

// try runs the batch in one store transaction. Transitions run only on the
// batcher's goroutine, so what they touch of the engine (the id sequence, the
// jitter generator) needs no lock. It returns how many transitions were
// applied: all of them with a nil error (each request then holds its change,
// for finish to publish), or none, with errAbortBatch when the transition at
// the returned index failed (its error is in its request) or with the store's
// error when the commit failed.
//
// A store that can first reads the records the batch said it reads, in one
// go (prefetch.go). Should that read fail, the transaction is discarded and
// the batch runs again without it, so that a failure is met, and judged, by
// the transition whose read it is, as without a prefetch.
func (e *Engine) try(batch []*request) (int, error) {
	n, prefetchFailed, err := e.tryOnce(batch, true)
	if prefetchFailed {
		n, _, err = e.tryOnce(batch, false)
	}
	return n, err
}

// tryOnce is try, with a prefetch or without; prefetchFailed reports that
// the prefetch failed, and with it the transaction.
func (e *Engine) tryOnce(batch []*request, prefetch bool) (n int, prefetchFailed bool, err error) {
	changes := make([]*change, len(batch))
	failed := -1
	began := e.now()
	// From the commit until finish has published the batch, no Watch may
	// fix its view: it would see the batch in its snapshot and again as
	// events. The lock is taken once per batch, by the first try that
	// commits (apply may commit part of a batch, then the rest), and
	// finish releases it.
	heldBefore, committed := e.publishHeld, false
	defer func() {
		if !committed && !heldBefore {
			e.releasePublishing()
		}
	}()
	err = e.store.Update(func(tx Tx) error {
		if !e.publishHeld {
			defer func() {
				e.publishing.Lock()
				e.publishHeld = true
			}()
		}
		failed = -1 // the store may run the transaction again
		prefetchFailed = false
		if p, ok := tx.(Prefetcher); ok && prefetch {
			if keys := batchReads(batch); len(keys) > 0 {
				if err := p.Prefetch(keys); err != nil {
					prefetchFailed = true
					return err
				}
			}
		}
		for i, r := range batch {
			c := &change{now: e.now()}
			r.err = r.fn(&trackTx{Tx: tx, c: c}, c)
			if r.err != nil {
				failed = i
				// With the transition's error, so that a store that runs a
				// transaction again when it lost a conflict (a serializable
				// one) sees it did.
				return errors.Join(errAbortBatch, r.err)
			}
			changes[i] = c
		}
		countLatency(tx, changes)
		return e.rt.beforeCommit(tx, changes)
	})
	if prefetchFailed {
		return 0, true, err
	}
	if failed >= 0 {
		return failed, false, errAbortBatch
	}
	if err != nil {
		return 0, false, err
	}
	committed = true
	for i, r := range batch {
		r.change = changes[i]
	}
	e.opts.Observer.BatchCommitted(len(batch), e.now().Sub(began))
	return len(batch), false, nil
}
