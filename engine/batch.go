package engine

import (
	"errors"
)

// maxBatch bounds how many transitions share one store transaction.
const maxBatch = 256

// request is one state transition waiting for the batcher.
type request struct {
	fn func(tx Tx, c *change) error
	// durable requests are answered only after the store synced them.
	durable bool
	err     error
	done    chan struct{}
}

// errAbortBatch makes the store discard a batch in which one transition
// failed, so the failure leaves no partial writes behind.
var errAbortBatch = errors.New("abort batch")

// update runs fn as a state transition: it is applied by the batcher, in one
// store transaction with whatever other transitions are waiting, in the order
// they arrived, each seeing the writes of those before it. It returns fn's
// error, or the store's. It does not wait for the disk.
func (e *Engine) update(fn func(tx Tx, c *change) error) error { return e.submit(fn, false) }

// commit is update that returns only once the transition is on disk: the
// caller may acknowledge after it.
func (e *Engine) commit(fn func(tx Tx, c *change) error) error { return e.submit(fn, true) }

func (e *Engine) submit(fn func(tx Tx, c *change) error, durable bool) error {
	r := &request{fn: fn, durable: durable, done: make(chan struct{})}
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
// the sync, between batches: Badger's sync holds a lock its writer needs, so
// a sync running beside the writes would stall every commit behind it, while
// in turn the transitions that arrive during a sync make the next batch, and
// the batches grow with the load.
func (e *Engine) batcher() {
	defer close(e.batcherDone)
	for {
		var first *request
		select {
		case first = <-e.requests:
		case <-e.closeCh:
			return
		}
		batch := []*request{first}
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
		e.answer(batch)
	}
}

// answer wakes the callers of a batch: at once those that failed or need no
// sync, after one shared sync the others.
func (e *Engine) answer(batch []*request) {
	durable := false
	for _, r := range batch {
		if r.durable && r.err == nil {
			durable = true
			continue
		}
		close(r.done)
	}
	if !durable {
		return
	}
	began := e.now()
	err := e.store.Sync()
	if err == nil {
		e.opts.Observer.Synced(e.now().Sub(began))
	} else {
		err = e.syncFailed(err)
	}
	for _, r := range batch {
		if r.durable && r.err == nil {
			r.err = err
			close(r.done)
		}
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
// jitter generator) needs no lock; the mutex is taken only to publish the
// committed changes, so polls are not held up by the store's commit. It returns how many
// transitions were applied: all of them with a nil error, or none, with
// errAbortBatch when the transition at the returned index failed (its error is
// in its request) or with the store's error when the commit failed.
func (e *Engine) try(batch []*request) (int, error) {
	changes := make([]*change, len(batch))
	failed := -1
	began := e.now()
	// From the commit to the publication, no Watch may fix its view: it
	// would see the batch in its snapshot and again as events.
	locked := false
	defer func() {
		if locked {
			e.publishing.Unlock()
		}
	}()
	err := e.store.Update(func(tx Tx) error {
		if !locked {
			defer func() {
				e.publishing.Lock()
				locked = true
			}()
		}
		seqUsed := false
		for i, r := range batch {
			c := &change{now: e.now()}
			r.err = r.fn(&trackTx{Tx: tx, c: c}, c)
			if r.err != nil {
				failed = i
				return errAbortBatch
			}
			changes[i] = c
			seqUsed = seqUsed || c.seqUsed
		}
		if seqUsed {
			return tx.SetCounter(e.seq)
		}
		return nil
	})
	if failed >= 0 {
		return failed, errAbortBatch
	}
	if err != nil {
		return 0, err
	}
	took := e.now().Sub(began)
	e.mu.Lock()
	for _, c := range changes {
		e.afterCommitLocked(c)
	}
	e.mu.Unlock()
	e.publishing.Unlock()
	locked = false
	e.opts.Observer.BatchCommitted(len(batch), took)
	for _, c := range changes {
		report(e.opts.Observer, c)
		e.logAudits(c)
	}
	return len(batch), nil
}
