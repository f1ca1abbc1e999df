package engine

import (
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Engine applies the rules of durable to a Store. Every state transition runs
// under one mutex as one store transaction; an RPC that changes state answers
// only after a Sync has made its transaction durable, while lease hand-outs are
// answered without waiting for the disk (a lost lease is only a redelivery).
type Engine struct {
	store Store
	opts  Options
	clock Clock

	mu        sync.Mutex
	rng       *rand.Rand
	seq       int64 // last id handed out (queue sequence numbers, lease ids)
	closed    bool
	closeCh   chan struct{}
	loopDone  chan struct{}
	waiters   map[queueKey][]*waiter
	nextTimer time.Time // earliest timer due; zero when there is none
	timerWake chan struct{}
	watchers  map[*watcher]struct{}
	closeSubs map[string][]chan struct{} // workflow id → waiters for its close
}

// New returns an engine over store. It reads the id counter and the earliest
// timer from the store and starts the timer loop; leases that expired while the
// daemon was down are failed as timeouts when the loop first runs.
func New(store Store, opts Options) (*Engine, error) {
	opts = opts.withDefaults()
	seed := opts.Seed
	if seed == 0 {
		seed = opts.Clock.Now().UnixNano()
	}
	e := &Engine{
		store:     store,
		opts:      opts,
		clock:     opts.Clock,
		rng:       rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>1^0x9e3779b97f4a7c15)),
		closeCh:   make(chan struct{}),
		loopDone:  make(chan struct{}),
		waiters:   map[queueKey][]*waiter{},
		timerWake: make(chan struct{}, 1),
		watchers:  map[*watcher]struct{}{},
		closeSubs: map[string][]chan struct{}{},
	}
	err := store.View(func(tx Tx) error {
		n, err := tx.Counter()
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		e.seq = n
		ts, err := tx.DueTimers(1)
		if err != nil {
			return err
		}
		if len(ts) > 0 {
			e.nextTimer = ts[0].Due
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	go e.timerLoop()
	return e, nil
}

// Close stops the timer loop and answers every waiting long poll empty. It
// does not close the store.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.closeCh)
	for w := range e.watchers {
		w.stop(ErrClosed)
	}
	e.mu.Unlock()
	<-e.loopDone
	return nil
}

// change collects what a transaction did that the world outside the store
// must hear about once it commits.
type change struct {
	ready      map[queueKey]int // new entries per queue (due now)
	later      map[queueKey]bool
	timer      time.Time // earliest new timer
	activities []*durablev1.PendingActivity
	removed    []*durablev1.ActivityRef
	workflows  []*durablev1.WorkflowInfo
	closed     []string
	seqUsed    bool
}

func (c *change) enqueued(kind TaskKind, queue string, due, now time.Time) {
	k := queueKey{kind, queue}
	if due.After(now) {
		if c.later == nil {
			c.later = map[queueKey]bool{}
		}
		c.later[k] = true
		return
	}
	if c.ready == nil {
		c.ready = map[queueKey]int{}
	}
	c.ready[k]++
}

func (c *change) timerAt(t time.Time) {
	if c.timer.IsZero() || t.Before(c.timer) {
		c.timer = t
	}
}

// update runs fn as one store transaction under the engine's mutex, then
// wakes pollers, moves the timer and tells watchers. It does not sync.
func (e *Engine) update(fn func(tx Tx, c *change) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.updateLocked(fn)
}

func (e *Engine) updateLocked(fn func(tx Tx, c *change) error) error {
	if e.closed {
		return ErrClosed
	}
	var c *change
	err := e.store.Update(func(tx Tx) error {
		c = &change{}
		if err := fn(tx, c); err != nil {
			return err
		}
		if c.seqUsed {
			return tx.SetCounter(e.seq)
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.afterCommitLocked(c)
	return nil
}

// commit is update followed by a Sync: the caller may acknowledge after it.
func (e *Engine) commit(fn func(tx Tx, c *change) error) error {
	if err := e.update(fn); err != nil {
		return err
	}
	return e.store.Sync()
}

func (e *Engine) afterCommitLocked(c *change) {
	for k, n := range c.ready {
		e.wakeLocked(k, n)
	}
	for k := range c.later {
		e.wakeLocked(k, -1)
	}
	if !c.timer.IsZero() && (e.nextTimer.IsZero() || c.timer.Before(e.nextTimer)) {
		e.nextTimer = c.timer
		select {
		case e.timerWake <- struct{}{}:
		default:
		}
	}
	for _, id := range c.closed {
		for _, ch := range e.closeSubs[id] {
			close(ch)
		}
		delete(e.closeSubs, id)
	}
	if len(e.watchers) > 0 {
		e.publishLocked(c)
	}
}

// nextID hands out the next id of the engine's sequence.
func (e *Engine) nextID(c *change) int64 {
	e.seq++
	c.seqUsed = true
	return e.seq
}

func (e *Engine) now() time.Time { return e.clock.Now() }

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
