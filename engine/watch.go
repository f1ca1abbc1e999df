package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// watchBuffer is how many change events a watcher may have unread.
const watchBuffer = 4096

// ErrWatchLagged ends a watch whose reader fell more than watchBuffer
// events behind, or whose snapshot streamed while more records changed than
// the daemon keeps for it (see watch_catchup.go): the changes it missed are
// gone, so it should watch again and start from a fresh snapshot. It is the
// reader's pace, not a fault of the daemon.
var ErrWatchLagged = fmt.Errorf("the watch fell more than %d events behind, or more records changed during its snapshot than the daemon keeps; resubscribe for a fresh snapshot", watchBuffer)

// A watch snapshot carries closed workflows only from the last
// watchClosedWindow, and at most watchClosedMax of them, the newest: a
// console wants what just happened, and years of finished workflows would
// make every connect slower.
const (
	watchClosedWindow = 24 * time.Hour
	watchClosedMax    = 1000
)

// snapshotChunk bounds the items of one SNAPSHOT event.
const snapshotChunk = 500

type watcher struct {
	ch   chan *durablev1.WatchEvent
	once sync.Once
	err  error
	done chan struct{}
	// queues is the task queue list the watcher got last, at queuesAt
	// (see queueShower); guarded by the engine's mu.
	queues   []*durablev1.TaskQueue
	queuesAt time.Time
	// catching says the watcher's snapshot still streams: the changes
	// after its view gather in the catch-up log, from its seq from on
	// (watch_catchup.go), and none queue in ch. Guarded by the engine's mu.
	catching bool
	from     uint64
}

func (w *watcher) stop(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.done)
	})
}

func (c *change) upsert(in *durablev1.PendingActivity) { c.activities = append(c.activities, in) }

func (c *change) remove(workflowID, activityID string) {
	c.removed = append(c.removed, &durablev1.ActivityRef{WorkflowId: workflowID, ActivityId: activityID})
}

func (c *change) workflow(w *durablev1.WorkflowRecord) {
	c.workflows = append(c.workflows, w.GetInfo())
}

// operation notes an operation whose progress or state changed; the caller
// must not change op afterwards.
func (c *change) operation(op *durablev1.Operation) {
	c.operations = append(c.operations, op)
}

// publishLocked sends what a transaction changed to every watcher. An item
// changed twice in one transaction is sent once, in its last state.
func (e *Engine) publishLocked(c *change) {
	now := ts(e.now())
	var events []*durablev1.WatchEvent
	removed := map[string]bool{}
	for _, r := range c.removed {
		removed[r.GetWorkflowId()+"\x00"+r.GetActivityId()] = true
	}
	up := &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, ServerTime: now}
	seen := map[string]bool{}
	for i := len(c.activities) - 1; i >= 0; i-- {
		in := c.activities[i]
		k := in.GetWorkflowId() + "\x00" + in.GetActivityId()
		if seen[k] || removed[k] {
			continue
		}
		seen[k] = true
		view := proto.Clone(in).(*durablev1.PendingActivity)
		e.showInForce(view)
		up.Activities = append(up.Activities, view)
	}
	seenWF := map[string]bool{}
	for i := len(c.workflows) - 1; i >= 0; i-- {
		w := c.workflows[i]
		if seenWF[w.GetWorkflowId()] {
			continue
		}
		seenWF[w.GetWorkflowId()] = true
		up.Workflows = append(up.Workflows, proto.Clone(w).(*durablev1.WorkflowInfo))
	}
	if len(c.removed) > 0 {
		events = append(events, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE, Removed: c.removed, ServerTime: now})
	}
	for _, n := range c.audits {
		up.AuditRecords = append(up.AuditRecords, n.rec)
	}
	for _, o := range c.overrides {
		up.PolicyOverrides = append(up.PolicyOverrides, proto.CloneOf(o))
	}
	seenOp := map[string]bool{}
	for i := len(c.operations) - 1; i >= 0; i-- {
		op := c.operations[i]
		if seenOp[op.GetId()] {
			continue
		}
		seenOp[op.GetId()] = true
		up.Operations = append(up.Operations, proto.Clone(op).(*durablev1.Operation))
	}
	if len(up.Activities) > 0 || len(up.Workflows) > 0 || len(up.AuditRecords) > 0 || len(up.Operations) > 0 || len(up.PolicyOverrides) > 0 {
		events = append(events, up)
	}
	e.sendLocked(events)
}

// sendLocked queues events for every watcher, cutting off those that fell
// behind; the watchers whose snapshot still streams find them in the
// catch-up log.
func (e *Engine) sendLocked(events []*durablev1.WatchEvent) {
	if e.catchUp.catching() {
		e.catchUp.fold(events)
		for e.catchUp.over() {
			e.cutOffLocked(e.catchUp.oldestWatcher())
		}
	}
	for w := range e.watchers {
		if w.catching {
			continue
		}
		for _, ev := range events {
			if !e.queueLocked(w, ev) {
				break
			}
		}
	}
}

// queueLocked queues ev for a live w, or cuts w off if its buffer is full.
// A watcher whose snapshot is still streaming when it is cut off sends the
// rest of its snapshot and SNAPSHOT_DONE before it ends (see Watch).
func (e *Engine) queueLocked(w *watcher, ev *durablev1.WatchEvent) bool {
	select {
	case w.ch <- ev:
		return true
	default:
	}
	e.cutOffLocked(w)
	return false
}

// cutOffLocked ends w as lagging: it leaves the watchers and the catch-up
// log, and the events it had queued, which it will never send, are let go.
func (e *Engine) cutOffLocked(w *watcher) {
	w.stop(ErrWatchLagged)
	delete(e.watchers, w)
	e.catchUp.leave(w)
	for len(w.ch) > 0 {
		select {
		case <-w.ch:
		default:
		}
	}
}

// sendViewsLocked sends activities whose view changed without a transition
// of their own (an override change) as upserts of at most snapshotChunk.
func (e *Engine) sendViewsLocked(views []*durablev1.PendingActivity) {
	if len(e.watchers) == 0 || len(views) == 0 {
		return
	}
	now := ts(e.now())
	var events []*durablev1.WatchEvent
	for len(views) > 0 {
		n := min(len(views), snapshotChunk)
		events = append(events, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, ServerTime: now, Activities: views[:n]})
		views = views[n:]
	}
	e.sendLocked(events)
}

// Watch sends a snapshot of every pending activity (dead letters included,
// with the policy in force), every policy override, every running workflow
// plus the most recently closed ones (at most watchClosedMax, closed within
// watchClosedWindow) and every running operation plus the recently finished
// ones, and (in SNAPSHOT_DONE) the task queues, then each change (the task
// queues whole, at most once a second, see queueShower), until ctx ends,
// send fails, the engine closes or the reader falls behind (ErrWatchLagged,
// only ever after SNAPSHOT_DONE, so that a reader never holds half a
// snapshot when it subscribes again). More than Options.MaxWatchers at once
// are refused with a *WatchLimitError.
//
// The snapshot is read without the engine's lock, from a store view fixed
// at a point between two published batches (see Engine.publishing), and
// sent as it is read, a chunk at a time (watch_snapshot.go); the records
// changed after that point gather in the catch-up log while the snapshot
// streams (watch_catchup.go) and follow SNAPSHOT_DONE in their last state,
// then each change queues in the watcher's buffer and follows in order. A
// commit waits for a Watch only while it fixes its view and registers,
// never while it reads or sends.
func (e *Engine) Watch(ctx context.Context, req *durablev1.WatchRequest, send func(*durablev1.WatchEvent) error) error {
	w := &watcher{ch: make(chan *durablev1.WatchEvent, watchBuffer), done: make(chan struct{})}
	stop := make(chan struct{})
	r := e.startSnapshot(ctx, w, stop)
	defer func() {
		close(stop) // the reader, should it still be reading, ends its view
		e.mu.Lock()
		delete(e.watchers, w)
		e.catchUp.leave(w)
		e.mu.Unlock()
	}()
	for ev := range r.out {
		if err := send(ev); err != nil {
			return err
		}
	}
	if r.err != nil {
		return r.err
	}
	// The task queues are a gauge of now, not of the view: taken as the
	// snapshot ends. queueShower leaves the watcher alone until then, so
	// every list it queues for the watcher is newer than this one. In the
	// same step the watcher takes what changed since its view and goes
	// live: every event queued from then on is newer.
	e.mu.Lock()
	now := e.now()
	queues := e.taskQueuesLocked(now)
	w.queues, w.queuesAt = queues, now
	var caught []caughtState
	if w.catching {
		caught = e.catchUp.since(w.from)
		e.catchUp.leave(w)
	}
	e.mu.Unlock()
	err := send(&durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE, ServerTime: r.now, Writes: r.writes,
		TaskQueues: &durablev1.TaskQueueList{TaskQueues: queues}})
	if err != nil {
		return err
	}
	for _, ev := range catchUpEvents(caught, ts(now)) {
		select {
		case <-w.done:
			return w.err
		default:
		}
		if err := send(ev); err != nil {
			return err
		}
	}
	for {
		// A watcher cut off ends at once, without the events it still has.
		select {
		case <-w.done:
			return w.err
		default:
		}
		select {
		case ev := <-w.ch:
			if err := send(ev); err != nil {
				return err
			}
		case <-w.done:
			return w.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// registerLocked adds w to the watchers, unless the engine closed or
// MaxWatchers are open.
func (e *Engine) registerLocked(w *watcher) error {
	if e.closed {
		return ErrClosed
	}
	if len(e.watchers) >= e.opts.MaxWatchers {
		return &WatchLimitError{Limit: e.opts.MaxWatchers}
	}
	e.watchers[w] = struct{}{}
	e.catchUp.join(w)
	return nil
}

// WatchLimitError refuses a Watch because Limit watchers are open, the most
// Options.MaxWatchers allows.
type WatchLimitError struct{ Limit int }

func (e *WatchLimitError) Error() string {
	return fmt.Sprintf("%d watch streams are open, the most this daemon allows", e.Limit)
}

// watchOperationsScanned bounds the operation records a snapshot reads
// beyond the running ones, newest first.
const watchOperationsScanned = 1000

// watchedOperations returns the operations a snapshot shows: every one
// running at its view (running), and those among the newest
// watchOperationsScanned that finished after since, newest first.
func watchedOperations(tx Tx, running map[int64]bool, since time.Time) ([]*durablev1.Operation, error) {
	var ops []*durablev1.Operation
	seen := map[int64]bool{}
	scanned := 0
	_, err := tx.Operations(nil, func(r *durablev1.OperationRecord) bool {
		scanned++
		switch op := r.GetOperation(); {
		case op.GetState() == opRunning:
			seen[r.GetSeq()] = true
			ops = append(ops, op)
		case op.GetState() != opPreparing && op.GetFinishedTime().AsTime().After(since):
			ops = append(ops, op)
		}
		return scanned < watchOperationsScanned
	})
	if err != nil {
		return nil, err
	}
	for seq := range running {
		if seen[seq] {
			continue
		}
		r, err := tx.GetOperation(seq)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ops = append(ops, r.GetOperation())
	}
	return ops, nil
}

// snapshotReaders is how many Watch snapshots are read at once: half the
// processors, so that a crowd of watchers opening at once leaves the rest
// to the batcher and the polls.
func snapshotReaders() int { return max(1, runtime.GOMAXPROCS(0)/2) }
