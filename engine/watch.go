package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// ErrWatchLagged ends a watch whose reader fell too far behind; it should
// watch again and start from a fresh snapshot.
var ErrWatchLagged = errors.New("watch fell behind; resubscribe for a fresh snapshot")

// watchBuffer is how many change events a watcher may have unread.
const watchBuffer = 4096

// A watch snapshot carries closed workflows only from the last
// watchClosedWindow, and at most watchClosedMax of them, the newest: a
// console wants what just happened, and years of finished workflows would
// make every connect slower.
const (
	watchClosedWindow = 24 * time.Hour
	watchClosedMax    = 1000
)

// recentlyClosed keeps the watchClosedMax most recently closed workflows.
func recentlyClosed(closed []*durablev1.WorkflowInfo) []*durablev1.WorkflowInfo {
	slices.SortFunc(closed, func(a, b *durablev1.WorkflowInfo) int {
		return b.GetCloseTime().AsTime().Compare(a.GetCloseTime().AsTime())
	})
	return closed[:min(len(closed), watchClosedMax)]
}

// snapshotChunk bounds the items of one SNAPSHOT event.
const snapshotChunk = 500

type watcher struct {
	ch   chan *durablev1.WatchEvent
	once sync.Once
	err  error
	done chan struct{}
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
// behind.
func (e *Engine) sendLocked(events []*durablev1.WatchEvent) {
	for w := range e.watchers {
		for _, ev := range events {
			select {
			case w.ch <- ev:
			default:
				w.stop(ErrWatchLagged)
				delete(e.watchers, w)
			}
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
// ones, then each change, until ctx ends, send fails, the engine closes or
// the reader falls behind (ErrWatchLagged).
func (e *Engine) Watch(ctx context.Context, req *durablev1.WatchRequest, send func(*durablev1.WatchEvent) error) error {
	w := &watcher{ch: make(chan *durablev1.WatchEvent, watchBuffer), done: make(chan struct{})}
	var acts []*durablev1.PendingActivity
	var wfs []*durablev1.WorkflowInfo
	var ops []*durablev1.Operation
	since := e.now().Add(-watchClosedWindow)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	err := e.store.View(func(tx Tx) error {
		if err := tx.ScanActivities(func(a *durablev1.ActivityRecord) bool {
			e.showInForce(a.GetInfo())
			acts = append(acts, a.GetInfo())
			return true
		}); err != nil {
			return err
		}
		var closed []*durablev1.WorkflowInfo
		err := eachWorkflow(tx, func(r *durablev1.WorkflowRecord) {
			switch in := r.GetInfo(); {
			case in.GetStatus() == statusRunning:
				wfs = append(wfs, in)
			case in.GetCloseTime().AsTime().After(since):
				closed = append(closed, in)
			}
		})
		wfs = append(wfs, recentlyClosed(closed)...)
		if err != nil {
			return err
		}
		ops, err = e.watchedOperationsLocked(tx, since)
		return err
	})
	overrides := e.overrideTable().sorted()
	if err == nil {
		e.watchers[w] = struct{}{}
	}
	now := ts(e.now())
	e.mu.Unlock()
	if err != nil {
		return err
	}
	defer func() {
		e.mu.Lock()
		delete(e.watchers, w)
		e.mu.Unlock()
	}()

	if len(ops) > 0 || len(overrides) > 0 {
		// Few and small: the first snapshot event carries them all.
		ev := &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT, ServerTime: now, Operations: ops}
		for _, o := range overrides {
			ev.PolicyOverrides = append(ev.PolicyOverrides, proto.CloneOf(o))
		}
		if err := send(ev); err != nil {
			return err
		}
	}
	for len(acts) > 0 || len(wfs) > 0 {
		ev := &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT, ServerTime: now}
		n := min(len(acts), snapshotChunk)
		ev.Activities, acts = acts[:n], acts[n:]
		m := min(len(wfs), snapshotChunk-n)
		ev.Workflows, wfs = wfs[:m], wfs[m:]
		if err := send(ev); err != nil {
			return err
		}
	}
	if err := send(&durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE, ServerTime: now}); err != nil {
		return err
	}
	for {
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

// watchOperationsScanned bounds the operation records a snapshot reads
// beyond the running ones, newest first.
const watchOperationsScanned = 1000

// watchedOperationsLocked returns the operations a snapshot shows: every
// running one, and those among the newest watchOperationsScanned that
// finished after since, newest first.
func (e *Engine) watchedOperationsLocked(tx Tx, since time.Time) ([]*durablev1.Operation, error) {
	var ops []*durablev1.Operation
	running := map[int64]bool{}
	scanned := 0
	_, err := tx.Operations(nil, func(r *durablev1.OperationRecord) bool {
		scanned++
		switch op := r.GetOperation(); {
		case op.GetState() == opRunning:
			running[r.GetSeq()] = true
			ops = append(ops, op)
		case op.GetState() != opPreparing && op.GetFinishedTime().AsTime().After(since):
			ops = append(ops, op)
		}
		return scanned < watchOperationsScanned
	})
	if err != nil {
		return nil, err
	}
	for seq := range e.ops {
		if running[seq] {
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
