package engine

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Engine applies the rules of durable to a Store. Every state transition is
// applied by one goroutine, the batcher (batch.go), inside a store
// transaction it shares with the transitions waiting beside it; an RPC that
// changes state answers only after a Sync has made its transaction durable,
// and what a transition changed is published (handed to polls, timers and
// watchers) only after that Sync too, while lease hand-outs are answered
// without waiting for the disk (a lost lease is only a redelivery). The
// mutex guards the in-memory indexes, the parked polls and the watchers.
type Engine struct {
	store Store
	opts  Options
	clock Clock
	// rt is how the engine meets its store: the embedded runtime, or the
	// shared one on a store other nodes use too (runtime.go).
	rt engineRuntime

	// Owned by the batcher goroutine: the jitter generator and, for the
	// embedded runtime, the last id handed out (queue sequence numbers,
	// audit ids).
	rng *rand.Rand
	seq int64

	// firing is held while a batch of due timers is popped and fired, so
	// that whoever fires timers next sees that batch published (timers.go).
	firing sync.Mutex

	// publishing is held by the batcher from just before a batch commits
	// until its changes are published (after its sync, so a Watch that
	// opens waits for at most the sync under way), and by a Watch while it
	// fixes the store view of its snapshot and registers: so a snapshot's
	// view holds exactly the changes published before the watcher could
	// hear of later ones (watch.go). It is never held while the store is
	// read.
	publishing sync.Mutex
	// publishHeld says whether the batcher holds publishing; only the
	// batcher reads or sets it (batch.go).
	publishHeld bool
	// keptBack holds the transitions that arrived during a sync and wait
	// for the batch after it; only the batcher touches it (batch.go).
	keptBack []*request

	mu          sync.Mutex
	closed      bool
	closeCh     chan struct{}
	loopDone    chan struct{}
	requests    chan *request // transitions for the batcher (see batch.go)
	batcherDone chan struct{}
	waiters     map[queueKey][]*waiter
	alarms      map[queueKey]time.Time  // when each queue's alarm rings, see poll.go
	queues      map[queueKey]*entryHeap // pending tasks by queue, see index.go
	timers      timerSet                // the live timers kept in memory, earliest first
	timerWake   chan struct{}
	watchers    map[*watcher]struct{}
	// early marks the tasks queued ahead of the sync of their transition
	// (handout.go).
	early map[QueueEntry]*syncWait
	// catchUp holds what changed while watchers' snapshots stream
	// (watch_catchup.go).
	catchUp catchUp
	// horizon is the end of the window of waiting work kept in memory;
	// refilling is held while a refill moves it (horizon.go).
	horizon   time.Time
	refilling sync.Mutex
	// snapshotReads holds a token for each Watch reading a chunk of its
	// snapshot; snapshotViews counts the store views of snapshots still
	// streaming (watch_snapshot.go).
	snapshotReads chan struct{}
	snapshotViews sync.WaitGroup
	// longViews holds a token for each snapshot view open on a store
	// that bounds them (LongViewStore); nil on any other.
	longViews   chan struct{}
	closeSubs   map[string][]chan struct{} // workflow id → waiters for its close
	counts      map[stateKey]int           // activities per queue and state, see gauge.go
	books       map[string]*queueBook      // tasks and leases per queue, see taskqueue.go
	pollers     map[pollerKey]*pollerSeen  // workers polling, see taskqueue.go
	janitorDone chan struct{}
	statsDone   chan struct{}
	queuesDone  chan struct{} // closes when the task queue shower stops
	// trailJanitorDone closes when the janitor of finished activities stops.
	trailJanitorDone chan struct{}

	// Operations (operation_run.go): opSeq is the number of the last one
	// started, owned by the batcher; the rest is guarded by mu.
	opSeq    int64
	ops      map[int64]*opRun // running operations
	opsPurge []int64          // operations whose work list is to be deleted
	opsWake  chan struct{}
	opsDone  chan struct{}

	// overrides is the policy override table in force (override.go),
	// replaced whole after each committed change and read without a lock.
	overrides atomic.Pointer[overrideTable]

	// gate says whether writes are allowed now (gate.go).
	gate *writeGate
	// gateRefused and writesSince are what Watch shows of the gate:
	// whether writes were refused at its last change and since when;
	// gateShownAt is when watchers last heard of it (gate.go). Guarded by
	// mu.
	gateRefused              bool
	writesSince, gateShownAt time.Time

	// sticky remembers which worker session leased each workflow's last
	// task, so that its next task may carry only new events (sticky.go).
	sticky stickyMarks
}

// New returns an engine over store. It reads the id counter, the activity
// counts, the work due within the window and what is not windowed (see
// horizon.go) from the store and starts the timer loop; leases that expired
// while the daemon was down are failed as timeouts when the loop first runs. Redrive
// operations that were running go on from where they stopped, paced from now.
func New(store Store, opts Options) (*Engine, error) {
	opts = opts.withDefaults()
	seed := opts.Seed
	if seed == 0 {
		seed = opts.Clock.Now().UnixNano()
	}
	e := &Engine{
		store:         store,
		opts:          opts,
		clock:         opts.Clock,
		rng:           rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>1^0x9e3779b97f4a7c15)),
		closeCh:       make(chan struct{}),
		loopDone:      make(chan struct{}),
		requests:      make(chan *request),
		batcherDone:   make(chan struct{}),
		waiters:       map[queueKey][]*waiter{},
		alarms:        map[queueKey]time.Time{},
		queues:        map[queueKey]*entryHeap{},
		early:         map[QueueEntry]*syncWait{},
		timerWake:     make(chan struct{}, 1),
		watchers:      map[*watcher]struct{}{},
		catchUp:       catchUp{budget: catchUpBudget},
		snapshotReads: make(chan struct{}, snapshotReaders()),
		closeSubs:     map[string][]chan struct{}{},
		counts:        map[stateKey]int{},
		books:         map[string]*queueBook{},
		pollers:       map[pollerKey]*pollerSeen{},
		janitorDone:   make(chan struct{}),
		statsDone:     make(chan struct{}),
		queuesDone:    make(chan struct{}),
		ops:           map[int64]*opRun{},
		opsWake:       make(chan struct{}, 1),
		opsDone:       make(chan struct{}),

		trailJanitorDone: make(chan struct{}),
		gate:             newWriteGate(opts.ReadOnly),
	}
	e.gateRefused, e.writesSince = opts.ReadOnly != nil, e.now()
	shared, isShared := store.(SharedStore)
	if isShared {
		e.rt = newSharedRuntime(e, shared)
	} else {
		e.rt = &embedded{e: e}
	}
	if s, ok := store.(LongViewStore); ok {
		e.longViews = make(chan struct{}, max(1, min(s.LongViews(), opts.MaxWatchers)))
	}
	err := store.View(func(tx Tx) error {
		// Timers of activities whose type has an override are where the
		// override puts them: load the overrides first.
		if err := e.loadOverrides(tx); err != nil {
			return err
		}
		if !isShared {
			if err := e.loadEmbedded(tx); err != nil {
				return err
			}
		}
		return e.loadOperations(tx)
	})
	if err == nil && isShared {
		err = e.rt.(*sharedRuntime).load()
	}
	if err != nil {
		return nil, err
	}
	if f := opts.WritesChangedFunc; f != nil {
		f(e.gate.err()) // before anything can change it
	}
	go e.batcher()
	go e.timerLoop()
	go e.auditJanitor()
	go e.statsJanitor()
	go e.trailJanitor()
	go e.releaser()
	go e.queueShower()
	e.rt.start()
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
	// Wait for the snapshots being read, which hold the store, and keep
	// new ones from starting. A reader waiting for its client lets go of
	// its view at once (closeCh), however slow the client.
	for range cap(e.snapshotReads) {
		e.snapshotReads <- struct{}{}
	}
	e.snapshotViews.Wait()
	<-e.loopDone
	<-e.janitorDone
	<-e.statsDone
	<-e.queuesDone
	<-e.trailJanitorDone
	<-e.opsDone
	<-e.batcherDone
	e.rt.stop()
	return nil
}

// change collects what a transaction did that the world outside the store
// must hear about once it is published (see batch.go).
type change struct {
	entries    []QueueEntry             // new queue entries
	timers     []Timer                  // new or moved timers
	gone       []*durablev1.ActivityRef // activities whose timers go (see dropTimers)
	now        time.Time
	activities []*durablev1.PendingActivity
	removed    []*durablev1.ActivityRef
	workflows  []*durablev1.WorkflowInfo
	closed     []string
	seqUsed    bool
	moves      []stateMove   // activities between counts, see gauge.go
	tasks      []taskMove    // tasks between spots of their queue's books, see taskqueue.go
	observed   []observation // for the Observer, see observe.go
	audits     []auditNote   // operator actions, see audit.go
	operations []*durablev1.Operation
	// overrides set or (Cleared) cleared, see override.go
	overrides []*durablev1.PolicyOverride
	// refill moves the window of waiting work on, see horizon.go
	refill *refill
	// latency are the attempts that ended, counted once per batch (see
	// countLatency).
	latency []latencySample
	// draw is what the rules of the change draw from (apply.go).
	draw engineDraw
}

func (c *change) enqueue(q QueueEntry) { c.entries = append(c.entries, q) }
func (c *change) addTimer(ts ...Timer) { c.timers = append(c.timers, ts...) }

// dropTimers notes an activity whose timers no longer apply (it is
// dead-lettered); those of activities that are removed go as well.
func (c *change) dropTimers(workflowID, activityID string) {
	c.gone = append(c.gone, &durablev1.ActivityRef{WorkflowId: workflowID, ActivityId: activityID})
}

// shown reports whether the change shows anything outside the engine that
// a crash could take back: a task for the polls, a state for watchers and
// metrics, a closed workflow, an operator action. Timers alone show nothing.
func (c *change) shown() bool {
	return len(c.entries) > 0 || len(c.gone) > 0 || len(c.activities) > 0 || len(c.removed) > 0 ||
		len(c.workflows) > 0 || len(c.closed) > 0 || len(c.moves) > 0 || len(c.tasks) > 0 || len(c.observed) > 0 ||
		len(c.audits) > 0 || len(c.operations) > 0 || len(c.overrides) > 0
}

// publishChangeLocked makes a committed change visible: its queue entries to
// polls (waking a parked one for each entry due, setting the queue's alarm
// for the others, see poll.go), its timers, the overrides in force, the
// activity counts, the callers waiting for a workflow to close, watchers.
func (e *Engine) publishChangeLocked(c *change) {
	e.applyOverridesLocked(c.overrides)
	if len(c.entries) > 0 {
		now := e.now()
		for _, q := range c.entries {
			if e.queuedEarlyLocked(q) || !e.rt.queuedLocked(q) {
				continue
			}
			k := queueKey{q.Kind, q.Queue}
			if q.Due.After(now) {
				if len(e.waiters[k]) > 0 {
					e.armLocked(k, q.Due)
				}
				continue
			}
			e.wakeLocked(k, 1)
		}
	}
	if len(c.timers) > 0 || len(c.gone) > 0 || len(c.removed) > 0 {
		before := e.nextTimerLocked()
		for _, t := range c.timers {
			e.setTimerLocked(t)
		}
		// After the sets: an activity scheduled and dropped in one
		// transition (its workflow closed) keeps no timer.
		for _, r := range append(c.gone, c.removed...) {
			e.timers.removeActivity(r.GetWorkflowId(), r.GetActivityId())
		}
		if next := e.nextTimerLocked(); !next.IsZero() && (before.IsZero() || next.Before(before)) {
			select {
			case e.timerWake <- struct{}{}:
			default:
			}
		}
	}
	e.countLocked(c.moves)
	e.bookLocked(c.tasks)
	if c.refill != nil {
		e.applyRefillLocked(c.refill)
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

// nextID hands out the next id of the engine's sequence (runtime.go).
func (e *Engine) nextID(c *change) int64 { return e.rt.nextID(c) }

func (e *Engine) now() time.Time { return e.clock.Now() }

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
