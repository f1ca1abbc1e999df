package engine

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The shared runtime (see runtime.go for how it differs from the embedded
// one): the store is the index, memory only an alarm clock.
//
//   - Polls claim due tasks from the store inside their lease transaction
//     (ClaimQueued skips rows another node's transaction holds); a poll that
//     finds none arms its queue's alarm for the store's next due time (the
//     claim reads it), and a poll that took as many as it asked for wakes one
//     more, since the queue may hold more than one poll can take.
//   - The timer loop fires, in one transaction, the timers ClaimTimers
//     returns, and of the node's own timers (the timer set holds those its
//     changes set) only those an override moved earlier than the store has
//     them. It wakes at the earliest of its own timers, the store's next due
//     time read after each round, and a sweep every Options.SharedSweep,
//     which finds the timers of a node that died or that another node set
//     earlier than anything this node knows.
//   - Ids come from blocks ReserveIDs hands out, refilled in a batch's own
//     transaction when half used.
//   - Counts and the queues' books are read from the store, every
//     sharedRefreshEvery and at each read of them.

const (
	// idBlock is how many ids one ReserveIDs call takes.
	idBlock = 1000
	// sharedRefreshEvery is how often the counts and the books are read
	// again from the store.
	sharedRefreshEvery = 2 * time.Second
	// booksQueued bounds the queued tasks per queue and kind whose due
	// times the books read; more are counted as later.
	booksQueued = 1000
	// leaseRetries bounds how often a poll's lease transaction is tried
	// again after the store gave up on it.
	leaseRetries = 3
	// booksWorkflowTasks bounds the workflow tasks the books read, all
	// queues together.
	booksWorkflowTasks = 10000
	// booksLeases bounds the running attempts the books read per refresh.
	booksLeases = 10000
)

// DefaultSharedSweep is the default of Options.SharedSweep.
const DefaultSharedSweep = time.Second

// sharedRuntime is the runtime of a SharedStore.
type sharedRuntime struct {
	e     *Engine
	store SharedStore

	// The id block [next, end), owned by the batcher; idErr is a failure to
	// reserve one outside a batch's transaction, which fails that batch.
	next, end int64
	idErr     error

	// storeNext is the store's earliest timer after the last round (zero:
	// none), sweepAt when the next sweep is due; guarded by the engine's mu.
	storeNext, sweepAt time.Time

	// refreshing serializes the reads of counts and books.
	refreshing sync.Mutex
	// lookedAlive is the nodes alive at the last look for operations
	// whose node is gone (adoptOrphans); only the refresher touches it.
	lookedAlive map[string]bool
	// others is what the other live nodes shared of their pollers at the
	// last read of the books; guarded by the engine's mu.
	others     []PollerState
	stopListen func()
	stopCh     chan struct{}
	done       chan struct{}
}

func newSharedRuntime(e *Engine, s SharedStore) *sharedRuntime {
	return &sharedRuntime{e: e, store: s, stopCh: make(chan struct{}), done: make(chan struct{})}
}

// sharedTx is the SharedTx under the Tx a transition sees (a trackTx, whose
// counting claims do not disturb: they read no record).
func sharedTx(tx Tx) SharedTx {
	if t, ok := tx.(*trackTx); ok {
		tx = t.Tx
	}
	return tx.(SharedTx)
}

// load readies the runtime at New: everything is kept (there is no window:
// the store is the index), the first id block is reserved, the counts are
// read, operations other live nodes run are left to them, and the first
// round of timers sweeps the store (leases that expired while no node ran).
func (r *sharedRuntime) load() error {
	e := r.e
	e.horizon = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	first, err := r.reserve()
	if err != nil {
		return err
	}
	r.next, r.end = first, first+idBlock
	if err := r.adoptOperations(); err != nil {
		return err
	}
	r.sweepAt = e.now()
	return r.refresh(false)
}

func (r *sharedRuntime) reserve() (int64, error) {
	var first int64
	err := r.store.Update(func(tx Tx) error {
		var err error
		first, err = sharedTx(tx).ReserveIDs(idBlock)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reserve ids: %w", err)
	}
	return first, nil
}

func (r *sharedRuntime) take(k queueKey, now time.Time, max int, lease func(tx Tx, c *change, entries []QueueEntry) (int, error)) (bool, time.Time, error) {
	e := r.e
	for failures := 0; ; {
		var claimed, n int
		var next time.Time
		err := e.lease(func(tx Tx, c *change) error {
			st := sharedTx(tx)
			claimed, n, next = 0, 0, time.Time{}
			// Due as of this run of the transaction, which may come a batch
			// or more after the poll looked: a task queued meanwhile, due
			// at its own commit, is taken now instead of being missed and
			// then rung for at once by the alarm.
			at := e.now()
			if at.Before(now) {
				at = now
			}
			got, err := st.ClaimQueued(k.kind, k.queue, at, max)
			if err != nil {
				return err
			}
			claimed = len(got.Entries)
			if claimed == 0 {
				next = got.Next
				return nil
			}
			n, err = lease(tx, c, got.Entries)
			return err
		})
		if err != nil {
			// Nodes claiming from one queue at once can keep a
			// serializable store's transactions conflicting past the
			// times it runs them again; the poll tries a few more times,
			// each after a short random pause, before it gives up.
			if failures++; failures > leaseRetries || refused(err) || errors.Is(err, ErrClosed) {
				return false, time.Time{}, err
			}
			select {
			case <-time.After(time.Duration(rand.Int64N(int64(failures) * int64(5*time.Millisecond)))):
			case <-e.closeCh:
				return false, time.Time{}, ErrClosed
			}
			continue
		}
		if claimed == max {
			// There may be more: pass the turn on to a poll parked here.
			e.mu.Lock()
			e.wakeLocked(k, 1)
			e.mu.Unlock()
		}
		switch {
		case n > 0:
			return true, time.Time{}, nil
		case claimed == 0:
			return false, next, nil
		}
		// Every entry claimed had moved on: look again.
	}
}

func (r *sharedRuntime) queuedLocked(QueueEntry) bool { return true }

// queuedAheadLocked declines: the polls take from the store, which is
// durable at commit (handout.go).
func (r *sharedRuntime) queuedAheadLocked(QueueEntry) bool { return false }

// ringLocked wakes one parked poll: what is due is in the store, and a poll
// that takes all it asked for wakes the next.
func (r *sharedRuntime) ringLocked(k queueKey, now time.Time) { r.e.wakeLocked(k, 1) }

// dueLocked reports whether a round of timers may find something: one of
// the node's own timers is due, the store's next one is, or a sweep is.
func (r *sharedRuntime) dueLocked(now time.Time) bool {
	if n := r.e.timers.next(); !n.IsZero() && !n.After(now) {
		return true
	}
	if !r.storeNext.IsZero() && !r.storeNext.After(now) {
		return true
	}
	return !now.Before(r.sweepAt)
}

func (r *sharedRuntime) fireBatch() (bool, error) {
	e := r.e
	e.mu.Lock()
	now := e.now()
	if !r.dueLocked(now) {
		e.mu.Unlock()
		return true, nil
	}
	own := e.timers.popDue(now, timerBatch)
	e.mu.Unlock()
	var claimed int
	var next time.Time
	var acted bool
	err := e.update(func(tx Tx, c *change) error {
		st := sharedTx(tx)
		ts, err := st.ClaimTimers(now, timerBatch)
		if err != nil {
			return err
		}
		claimed, next = len(ts), time.Time{}
		defer func() { acted = c.shown() }()
		for _, t := range ts {
			if err := e.fire(tx, c, t, now); err != nil {
				return err
			}
		}
		moved, err := r.movedByOverride(tx, ts, own)
		if err != nil {
			return err
		}
		for _, t := range moved {
			if err := e.fire(tx, c, t, now); err != nil {
				return err
			}
		}
		due, ok, err := st.NextTimer(now)
		if ok {
			next = due
		}
		return err
	})
	if err != nil {
		e.mu.Lock()
		for _, t := range own {
			e.timers.restore(t)
		}
		e.mu.Unlock()
		return false, err
	}
	// A full batch that did nothing is timers an override moved later than
	// the store has them (see timerMovedLater): the same rows would come
	// back, so the round ends here.
	if acted && (claimed == timerBatch || len(own) == timerBatch) {
		return false, nil
	}
	e.mu.Lock()
	r.storeNext = next
	r.sweepAt = now.Add(e.opts.SharedSweep)
	e.mu.Unlock()
	return true, nil
}

// movedByOverride returns the node's own due timers that the store does
// not hold at that time: those an override moved earlier than the record
// puts them (the store's timers follow the records). Those fire from
// memory, fenced like any timer by the record they act on; every other own
// timer is only an alarm, its row claimed from the store like any node's,
// so that nodes never fire one timer at once.
func (r *sharedRuntime) movedByOverride(tx Tx, claimed, own []Timer) ([]Timer, error) {
	if len(own) == 0 || len(r.e.overrideTable()) == 0 {
		return nil, nil
	}
	seen := make(map[timerKey]bool, len(claimed))
	for _, t := range claimed {
		seen[keyOf(t)] = true
	}
	var out []Timer
	for _, t := range own {
		if seen[keyOf(t)] || t.Kind == UserTimer || t.Kind == WorkflowTaskLeaseTimer {
			continue
		}
		a, err := tx.GetActivity(t.WorkflowID, t.ID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		held := false
		for _, st := range TimersOf(a) {
			held = held || st.Kind == t.Kind && st.Due.Equal(t.Due)
		}
		if !held {
			out = append(out, t)
		}
	}
	return out, nil
}

// timerMovedLater sets the timer again in the node's set; a lease deadline
// an override moved later is written to the record too, so the store's
// timer moves with it rather than being claimed again and again.
func (r *sharedRuntime) timerMovedLater(tx Tx, c *change, t Timer, due time.Time) error {
	moved := t
	moved.Due = due
	c.addTimer(moved)
	if t.Kind != ActivityLeaseTimer {
		return nil
	}
	a, err := tx.GetActivity(t.WorkflowID, t.ID)
	if err != nil {
		return ignoreNotFound(err)
	}
	in := a.GetInfo()
	if in.GetLeaseDeadline().AsTime().Equal(due) {
		return nil
	}
	in.LeaseDeadline = ts(due)
	if err := tx.PutActivity(a); err != nil {
		return err
	}
	c.upsert(in)
	return nil
}

func (r *sharedRuntime) wakeAtLocked(now time.Time) time.Time {
	next := r.sweepAt
	for _, t := range []time.Time{r.e.timers.next(), r.storeNext} {
		if !t.IsZero() && t.Before(next) {
			next = t
		}
	}
	return next
}

func (r *sharedRuntime) nextID(*change) int64 {
	if r.next >= r.end {
		// A batch used a whole block: take another outside it.
		first, err := r.reserve()
		if err != nil {
			r.idErr = err
			return 0
		}
		r.next, r.end = first, first+idBlock
	}
	id := r.next
	r.next++
	return id
}

func (r *sharedRuntime) nextOpSeq(c *change) int64 { return r.nextID(c) }

// beforeCommit refills the id block when half of it is used and sends the
// other nodes the batch's notice.
func (r *sharedRuntime) beforeCommit(tx Tx, changes []*change) error {
	if err := r.idErr; err != nil {
		r.idErr = nil
		return err
	}
	st := tx.(SharedTx)
	if r.end-r.next < idBlock/2 {
		first, err := st.ReserveIDs(idBlock)
		if err != nil {
			return err
		}
		r.next, r.end = first, first+idBlock
	}
	if n := noticeOf(changes); !n.empty() {
		return st.Notify(n)
	}
	return nil
}

func (r *sharedRuntime) node() string { return r.store.Node() }

func (r *sharedRuntime) readGauges(books bool) {
	if err := r.refresh(books); err != nil && !errors.Is(err, ErrClosed) {
		r.e.opts.Logger.Warn("reading the activity counts and task queues", "err", err)
	}
}

func (r *sharedRuntime) start() {
	r.stopListen = r.store.Listen(r.e.heard, r.e.resync)
	go r.refresher()
}

func (r *sharedRuntime) stop() {
	if r.stopListen != nil {
		r.stopListen()
	}
	close(r.stopCh)
	<-r.done
}

// refresher reads the counts and books again every sharedRefreshEvery.
func (r *sharedRuntime) refresher() {
	defer close(r.done)
	for {
		select {
		case <-time.After(sharedRefreshEvery):
		case <-r.stopCh:
			return
		}
		// One look at the nodes alive serves the books (whose pollers to
		// merge) and the orphaned operations.
		alive, aliveErr := r.aliveNodes()
		err := aliveErr
		if err == nil {
			err = r.refreshAs(true, alive)
		}
		if err != nil && !errors.Is(err, ErrClosed) {
			r.e.opts.Logger.Warn("reading the activity counts and task queues", "err", err)
		}
		if aliveErr == nil {
			if err := r.adoptOrphans(alive); err != nil && !errors.Is(err, ErrClosed) {
				r.e.opts.Logger.Warn("looking for redrive operations of nodes that are gone", "err", err)
			}
		}
		if err := r.sharePollers(); err != nil && !errors.Is(err, ErrClosed) {
			r.e.opts.Logger.Warn("sharing the workers polling this node", "err", err)
		}
	}
}

// refresh reads the activity counts (every node's, summed by the store)
// and, with books, the queues' books: the due times of the first
// booksQueued activity tasks of each queue (the rest count as later, from
// the counts), the workflow tasks waiting (up to booksWorkflowTasks), and
// the attempts running per worker.
func (r *sharedRuntime) refresh(books bool) error {
	var alive map[string]bool
	if books {
		var err error
		if alive, err = r.aliveNodes(); err != nil {
			return err
		}
	}
	return r.refreshAs(books, alive)
}

// refreshAs is refresh with the nodes alive already read (only the books
// need them: the pollers of the other live nodes are merged in).
func (r *sharedRuntime) refreshAs(books bool, alive map[string]bool) error {
	r.refreshing.Lock()
	defer r.refreshing.Unlock()
	e := r.e
	e.mu.Lock()
	names := map[string]bool{}
	for k := range e.pollers {
		names[k.queue] = true
	}
	e.mu.Unlock()
	counts := map[stateKey]int{}
	var bs map[string]*queueBook
	var others []PollerState
	var otherNodes []string
	for name := range alive {
		if name != r.store.Node() {
			otherNodes = append(otherNodes, name)
		}
	}
	err := e.store.View(func(tx Tx) error {
		_, err := tx.ActivityCounts(func(queue string, state durablev1.ActivityState, n int64) bool {
			counts[stateKey{queue: queue, state: state}] += int(n)
			names[queue] = true
			return true
		})
		if err != nil || !books {
			return err
		}
		bs = map[string]*queueBook{}
		book := func(name string) *queueBook {
			b := bs[name]
			if b == nil {
				b = &queueBook{leases: map[string]int{}}
				bs[name] = b
			}
			return b
		}
		add := func(q QueueEntry) {
			b := book(q.Queue)
			if b.queued[q.Kind] == nil {
				b.queued[q.Kind] = map[taskRef]time.Time{}
			}
			b.queued[q.Kind][taskRef{q.WorkflowID, q.ActivityID}] = q.Due
		}
		// Workflow tasks are at most one per running workflow: read them
		// across queues, up to a bound.
		seen := 0
		err = tx.QueuedIn(WorkflowTask, TimeRange{}, func(q QueueEntry) bool {
			add(q)
			seen++
			return seen < booksWorkflowTasks
		})
		if err != nil {
			return err
		}
		for name := range names {
			qs, err := tx.Queued(ActivityTask, name, booksQueued)
			if err != nil {
				return err
			}
			for _, q := range qs {
				add(q)
			}
		}
		read := 0
		_, err = tx.ActivitiesByState(StateRange{State: stateStarted}, nil, func(a *durablev1.ActivityRecord) bool {
			in := a.GetInfo()
			book(in.GetTaskQueue()).leases[in.GetLastWorkerIdentity()]++
			read++
			return read < booksLeases
		})
		if err != nil {
			return err
		}
		others, err = sharedTx(tx).Pollers(otherNodes)
		return err
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.counts = counts
	if bs != nil {
		e.books = bs
		r.others = others
	}
	e.mu.Unlock()
	return nil
}

func (r *sharedRuntime) otherPollersLocked() []PollerState { return r.others }

// sharePollers writes what this node knows of the workers polling it for
// the other nodes to list (refresh), since a worker may poll only some of
// the nodes: a node that listed only its own pollers would call a queue
// that other nodes serve unpolled.
func (r *sharedRuntime) sharePollers() error {
	e := r.e
	if err := e.gate.err(); err != nil {
		return nil // writes are refused: sharing waits for them
	}
	e.mu.Lock()
	e.forgetPollersLocked(e.now())
	ps := e.ownPollersLocked()
	e.mu.Unlock()
	return r.store.Update(func(tx Tx) error { return sharedTx(tx).SharePollers(ps) })
}

// nodeAliveWithin is how recently a node must have been heard from to be
// alive (the store's registry heartbeats every second).
const nodeAliveWithin = 5 * time.Second

// aliveNodes returns the nodes of the store heard from within
// nodeAliveWithin.
func (r *sharedRuntime) aliveNodes() (map[string]bool, error) {
	nodes, err := r.store.Nodes()
	if err != nil {
		return nil, err
	}
	alive := map[string]bool{}
	now := time.Now()
	for _, n := range nodes {
		if now.Sub(n.LastSeen) <= nodeAliveWithin {
			alive[n.Name] = true
		}
	}
	return alive, nil
}

// adoptOperations keeps, of the running operations loadOperations found,
// those this node runs: the ones it started, and the ones whose node is no
// longer alive, which it takes over (takeOver). A prepared operation a live
// node is still writing is not deleted.
func (r *sharedRuntime) adoptOperations() error {
	e := r.e
	self := r.store.Node()
	for seq := range e.ops {
		rec, _, err := r.takeOver(seq)
		if err != nil {
			return fmt.Errorf("take over operation %s: %w", OperationID(seq), err)
		}
		if rec == nil {
			delete(e.ops, seq)
		}
	}
	if len(e.opsPurge) == 0 {
		return nil
	}
	alive, err := r.aliveNodes()
	if err != nil {
		return err
	}
	var purge []int64
	err = r.store.View(func(tx Tx) error {
		for _, seq := range e.opsPurge {
			rec, err := tx.GetOperation(seq)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if rec.GetOperation().GetState() == opPreparing && rec.GetNode() != self && alive[rec.GetNode()] {
				continue
			}
			purge = append(purge, seq)
		}
		return nil
	})
	e.opsPurge = purge
	return err
}

// takeOver makes this node the one that runs operation seq, unless the
// operation has stopped running or a live node other than this one runs it,
// and returns its record (nil when it is not this node's to run) and the
// node its record named before. It runs in a transaction of its own: of two
// nodes taking one operation over at once, one commits and the other, run
// again, finds it taken by a live node. The node it was taken from, should
// it be alive after all (a pause longer than nodeAliveWithin), finds the
// record changed at its next release and stops (releaser.go).
func (r *sharedRuntime) takeOver(seq int64) (taken *durablev1.OperationRecord, from string, err error) {
	self := r.store.Node()
	err = r.store.Update(func(tx Tx) error {
		taken, from = nil, ""
		rec, err := tx.GetOperation(seq)
		if err != nil {
			return ignoreNotFound(err)
		}
		from = rec.GetNode()
		if rec.GetOperation().GetState() != opRunning {
			return nil
		}
		switch owner := rec.GetNode(); {
		case owner == self:
			taken = rec
			return nil
		case owner != "":
			alive, err := r.aliveNodes()
			if err != nil || alive[owner] {
				return err
			}
		}
		rec.Node, rec.Operation.Node = self, self
		if err := tx.PutOperation(rec); err != nil {
			return err
		}
		taken = rec
		return nil
	})
	return taken, from, err
}

// adoptOrphans takes over the running operations of nodes that are no
// longer alive (a node that died, or stopped, while it ran one), so that a
// redrive goes on through the nodes left instead of waiting for its node to
// come back, and runs any whose record names this node that it does not run
// yet: the record says which node runs an operation. The operation records
// are read only when the nodes alive differ from the last look: a node that
// dies is seen dead once, nodeAliveWithin after its last heartbeat.
func (r *sharedRuntime) adoptOrphans(alive map[string]bool) error {
	e := r.e
	if err := e.gate.err(); err != nil {
		return nil // writes are refused: the look waits for them
	}
	if r.lookedAlive != nil && maps.Equal(alive, r.lookedAlive) {
		return nil
	}
	self := r.store.Node()
	e.mu.Lock()
	running := maps.Clone(e.ops)
	e.mu.Unlock()
	var orphans []int64
	err := r.store.View(func(tx Tx) error {
		orphans = orphans[:0]
		_, err := tx.Operations(nil, func(rec *durablev1.OperationRecord) bool {
			owner := rec.GetNode()
			switch {
			case rec.GetOperation().GetState() != opRunning:
			case owner == self && running[rec.GetSeq()] == nil, owner != self && !alive[owner]:
				orphans = append(orphans, rec.GetSeq())
			}
			return true
		})
		return err
	})
	if err != nil {
		return err
	}
	for _, seq := range orphans {
		rec, from, err := r.takeOver(seq)
		if err != nil {
			return fmt.Errorf("take over operation %s: %w", OperationID(seq), err)
		}
		if rec == nil {
			continue
		}
		e.mu.Lock()
		if e.ops[seq] == nil {
			e.ops[seq] = resumed(rec, e.now())
		}
		e.mu.Unlock()
		e.opts.Logger.Info("now running a redrive operation", "operation_id", OperationID(seq),
			"node", self, "from", from, "released", rec.GetNext(), "matched", rec.GetOperation().GetMatched())
		e.wakeOps()
	}
	r.lookedAlive = alive
	return nil
}
