package engine

import (
	"errors"
	"time"
)

// The runtime (engineRuntime) is how the engine meets its store: how a poll finds the tasks
// it leases, how due timers are found, where ids come from, what a batch
// does just before it commits, and what the engine does when another node
// committed something. The transitions (activity.go, workflow.go, timers.go's
// fire, ...) are the same whichever runtime runs; they see a Tx and a change
// and never ask.
//
// There are two runtimes, chosen at New by the store's type:
//
//   - embedded (this file), for a store only this process uses (Badger):
//     the engine is the only writer, so its memory can be the index. Polls
//     pop due tasks from in-memory heaps, the timer loop pops due timers from
//     the timer set (both within the window of horizon.go, refilled from the
//     store), and ids are one counter the batch writes back with SetCounter.
//     Nothing of this touches the store on the hot path but the transitions
//     themselves, which is what lets group commit carry the load.
//   - shared (runtime_shared.go), for a SharedStore (PostgreSQL) that other
//     nodes write too: memory can no longer say what is due, only when to
//     look. Polls claim tasks from the store inside their lease transaction,
//     the timer loop claims due timers (SKIP LOCKED, so nodes never hand out
//     the same one), ids come from blocks no other node gets, each batch
//     tells the other nodes what it did (a Notice, sent at commit), and their
//     notices wake this node's polls, close waiters and watchers (remote.go).
type engineRuntime interface {
	// take leases, for a poll of queue k, up to max tasks due at now: lease
	// runs in one lease transaction over the entries found and returns how
	// many it leased (an entry whose record moved on is skipped). take
	// reports whether any was leased; when none was, next is the due time of
	// the earliest task not yet due (zero when none is known), for the
	// queue's alarm. lease may run several times (a store runs a
	// transaction again after a conflict, and take tries again after a
	// failure), and the run that commits may not call it at all when it
	// finds nothing to claim: what lease records is the poll's only when
	// take reports a lease.
	take(k queueKey, now time.Time, max int, lease func(tx Tx, c *change, entries []QueueEntry) (int, error)) (leased bool, next time.Time, err error)
	// queuedLocked makes a committed queue entry pollable and reports
	// whether parked polls should hear of it.
	queuedLocked(q QueueEntry) bool
	// queuedAheadLocked makes an entry due now pollable before the sync of
	// the transition that committed it (handout.go) and reports whether it
	// did; a runtime that does not queue ahead declines.
	queuedAheadLocked(q QueueEntry) bool
	// ringLocked wakes the polls parked on a queue whose alarm rang.
	ringLocked(k queueKey, now time.Time)

	// fireBatch fires up to timerBatch due timers in one transaction; done
	// is true when none was due. It runs with Engine.firing held and writes
	// allowed.
	fireBatch() (done bool, err error)
	// timerMovedLater handles a timer found to be due later than the entry
	// that fired (an override moved it): due is when it fires now.
	timerMovedLater(tx Tx, c *change, t Timer, due time.Time) error
	// wakeAtLocked is when the timer loop must look again; zero when only a
	// wake-up (a new timer, a notice) can give it something to do.
	wakeAtLocked(now time.Time) time.Time

	// nextID hands out the next id of the engine's sequence (queue
	// sequence numbers, audit ids); nextOpSeq the number of an operation.
	// Both run on the batcher.
	nextID(c *change) int64
	nextOpSeq(c *change) int64
	// beforeCommit runs in a batch's transaction after its transitions,
	// with the store's own Tx.
	beforeCommit(tx Tx, changes []*change) error

	// node is the name of this node on a shared store, "" otherwise.
	node() string
	// readGauges brings the activity counts (and, with books, the queues'
	// books) up to date before they are read: a no-op where every change
	// is this engine's, read from the store where other nodes change them.
	readGauges(books bool)
	// otherPollersLocked is what the other nodes said of the workers
	// polling them, as of the last read of the books (taskqueue.go); nil
	// where this engine is the only one.
	otherPollersLocked() []PollerState

	// start starts what the runtime runs beside the engine's goroutines,
	// once New has loaded the engine; stop ends it, at Close.
	start()
	stop()
}

// embedded is the runtime of a store only this engine writes.
type embedded struct {
	e *Engine
}

func (r *embedded) take(k queueKey, now time.Time, max int, lease func(tx Tx, c *change, entries []QueueEntry) (int, error)) (bool, time.Time, error) {
	e := r.e
	for {
		e.mu.Lock()
		taken, next := e.takeDue(k, now, max)
		e.mu.Unlock()
		if len(taken) == 0 {
			return false, next, nil
		}
		n := 0
		err := e.lease(func(tx Tx, c *change) error {
			var err error
			n, err = lease(tx, c, taken)
			return err
		})
		if err != nil {
			e.restore(taken)
			return false, time.Time{}, err
		}
		if n > 0 {
			return true, time.Time{}, nil
		}
	}
}

func (r *embedded) queuedLocked(q QueueEntry) bool { return r.e.pushEntryLocked(q) }

func (r *embedded) queuedAheadLocked(q QueueEntry) bool { return r.e.pushEntryLocked(q) }

func (r *embedded) ringLocked(k queueKey, now time.Time) { r.e.ringHeapLocked(k, now) }

func (r *embedded) fireBatch() (bool, error) {
	e := r.e
	e.mu.Lock()
	now := e.now()
	batch := e.timers.popDue(now, timerBatch)
	e.mu.Unlock()
	if len(batch) == 0 {
		return true, nil
	}
	err := e.update(func(tx Tx, c *change) error {
		for _, t := range batch {
			if err := e.fire(tx, c, t, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.mu.Lock()
		for _, t := range batch {
			e.timers.restore(t)
		}
		e.mu.Unlock()
	}
	return false, err
}

func (r *embedded) timerMovedLater(tx Tx, c *change, t Timer, due time.Time) error {
	t.Due = due
	c.addTimer(t)
	return nil
}

func (r *embedded) wakeAtLocked(now time.Time) time.Time {
	e := r.e
	next := e.nextTimerLocked()
	// The window moves on in time even with no poll to move it.
	if at := refillAt(e.horizon, e.opts.WaitWindow); next.IsZero() || at.Before(next) {
		next = at
	}
	return next
}

func (r *embedded) nextID(c *change) int64 {
	r.e.seq++
	c.seqUsed = true
	return r.e.seq
}

func (r *embedded) nextOpSeq(*change) int64 {
	r.e.opSeq++
	return r.e.opSeq
}

func (r *embedded) beforeCommit(tx Tx, changes []*change) error {
	for _, c := range changes {
		if c.seqUsed {
			return tx.SetCounter(r.e.seq)
		}
	}
	return nil
}

func (r *embedded) node() string    { return "" }
func (r *embedded) readGauges(bool) {}

func (r *embedded) otherPollersLocked() []PollerState { return nil }
func (r *embedded) start()                            {}
func (r *embedded) stop()                             {}

// loadEmbedded reads, at New, what the embedded runtime keeps in memory:
// the id counter and the indexes (horizon.go).
func (e *Engine) loadEmbedded(tx Tx) error {
	n, err := tx.Counter()
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	e.seq = n
	return e.rebuildIndex(tx)
}
