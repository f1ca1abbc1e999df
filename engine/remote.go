package engine

import (
	"errors"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// Notices between the nodes of a shared store (runtime_shared.go). Each
// batch tells the other nodes, at its commit, what it queued, closed and
// changed (noticeOf); a node that hears a notice (heard) does for it what
// publishing its own change would have done, from the store: it wakes a
// parked poll of each queue with a task due (or arms the queue's alarm for
// a later one), wakes the callers waiting for a closed workflow, reloads
// the policy overrides, sends its watchers the changed records (operations
// and audit records too) read from the store, and wakes its operations
// runner. A notice only says where to look: what the node does next is
// read from the store, so a notice lost (resync) costs time, never a wrong
// answer.

// noticeOf is what a batch tells the other nodes.
func noticeOf(changes []*change) Notice {
	var n Notice
	queued := map[queueKey]int{}
	acts := map[ActivityKey]bool{}
	wfs := map[string]bool{}
	ops := map[int64]bool{}
	addAct := func(k ActivityKey) {
		if !acts[k] {
			acts[k] = true
			n.Activities = append(n.Activities, k)
		}
	}
	for _, c := range changes {
		for _, q := range c.entries {
			k := queueKey{q.Kind, q.Queue}
			if i, ok := queued[k]; ok {
				if q.Due.Before(n.Queued[i].Due) {
					n.Queued[i].Due = q.Due
				}
				continue
			}
			queued[k] = len(n.Queued)
			n.Queued = append(n.Queued, QueuedNotice{Kind: q.Kind, Queue: q.Queue, Due: q.Due})
		}
		n.Closed = append(n.Closed, c.closed...)
		for _, in := range c.activities {
			addAct(ActivityKey{WorkflowID: in.GetWorkflowId(), ActivityID: in.GetActivityId()})
		}
		for _, r := range c.removed {
			addAct(ActivityKey{WorkflowID: r.GetWorkflowId(), ActivityID: r.GetActivityId()})
		}
		for _, w := range c.workflows {
			if id := w.GetWorkflowId(); !wfs[id] {
				wfs[id] = true
				n.Workflows = append(n.Workflows, id)
			}
		}
		n.Overrides = n.Overrides || len(c.overrides) > 0
		n.Operations = n.Operations || len(c.operations) > 0
		for _, op := range c.operations {
			if seq, ok := operationSeq(op.GetId()); ok && !ops[seq] {
				ops[seq] = true
				n.OperationSeqs = append(n.OperationSeqs, seq)
			}
		}
		for _, a := range c.audits {
			n.Audits = append(n.Audits, AuditKey{Time: a.rec.GetTime().AsTime(), ID: a.rec.GetId()})
		}
	}
	return n
}

// empty reports whether a notice says nothing.
func (n Notice) empty() bool {
	return len(n.Queued) == 0 && len(n.Closed) == 0 && len(n.Activities) == 0 && len(n.Workflows) == 0 &&
		!n.Overrides && !n.Operations && len(n.OperationSeqs) == 0 && len(n.Audits) == 0
}

// heard acts on a notice of another node. It runs on the store's listening
// goroutine, one notice at a time, in commit order.
func (e *Engine) heard(n Notice) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	now := e.now()
	for _, q := range n.Queued {
		k := queueKey{q.Kind, q.Queue}
		if len(e.waiters[k]) == 0 {
			continue // the next poll looks at the store itself
		}
		if q.Due.After(now) {
			e.armLocked(k, q.Due)
			continue
		}
		e.rt.ringLocked(k, now)
	}
	for _, id := range n.Closed {
		e.closedLocked(id)
	}
	watched := len(e.watchers) > 0
	e.mu.Unlock()
	if n.Overrides {
		e.reloadOverrides()
	}
	if watched && (len(n.Activities) > 0 || len(n.Workflows) > 0 || len(n.OperationSeqs) > 0 || len(n.Audits) > 0) {
		e.showRemote(n)
	}
	if n.Operations {
		e.wakeOps()
	}
}

// closedLocked wakes the callers waiting for a workflow to close.
func (e *Engine) closedLocked(id string) {
	for _, ch := range e.closeSubs[id] {
		close(ch)
	}
	delete(e.closeSubs, id)
}

// resync is called when notices may have been lost: every parked poll and
// every caller waiting for a close looks at the store again, the overrides
// are read again, the timer loop sweeps, the operations runner looks, and
// watchers, which cannot be told what they missed, are ended as lagging so
// that they watch again from a fresh snapshot.
func (e *Engine) resync() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	for k := range e.waiters {
		e.wakeLocked(k, -1)
	}
	for id := range e.closeSubs {
		e.closedLocked(id)
	}
	for w := range e.watchers {
		e.cutOffLocked(w)
	}
	e.mu.Unlock()
	e.reloadOverrides()
	e.wakeOps()
	select {
	case e.timerWake <- struct{}{}:
	default:
	}
}

// showRemote sends watchers the activities, workflows, operations and audit
// records another node changed (n names them), as the store has them now:
// upserts, and removals for the activities gone. publishing is held from
// the read to the send, so that no change of this node is published between
// them: a watcher gets each record's states in the order they were
// committed.
func (e *Engine) showRemote(n Notice) {
	e.publishing.Lock()
	defer e.publishing.Unlock()
	c := &change{}
	err := e.store.View(func(tx Tx) error {
		for _, k := range n.Activities {
			a, err := tx.GetActivity(k.WorkflowID, k.ActivityID)
			if errors.Is(err, ErrNotFound) {
				c.remove(k.WorkflowID, k.ActivityID)
				continue
			}
			if err != nil {
				return err
			}
			c.upsert(a.GetInfo())
		}
		for _, id := range n.Workflows {
			w, err := tx.GetWorkflow(id)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			showWorkflowTask(w)
			c.workflow(w)
		}
		for _, seq := range n.OperationSeqs {
			r, err := tx.GetOperation(seq)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if r.GetOperation().GetState() != opPreparing {
				c.operation(r.GetOperation())
			}
		}
		for _, k := range n.Audits {
			r, err := tx.GetAudit(k.Time, k.ID)
			if errors.Is(err, ErrNotFound) {
				continue // past its retention already
			}
			if err != nil {
				return err
			}
			// Shown, not logged: the node that wrote it logged it.
			c.audits = append(c.audits, auditNote{rec: r})
		}
		return nil
	})
	if err != nil {
		e.opts.Logger.Warn("reading what another node changed", "err", err)
		return
	}
	e.mu.Lock()
	if len(e.watchers) > 0 {
		e.publishLocked(c)
	}
	e.mu.Unlock()
}

// reloadOverrides reads the policy overrides another node changed and puts
// them in force: watchers hear of each one set or cleared, and the timers
// and views of the types whose override changed follow (followOverride).
func (e *Engine) reloadOverrides() {
	e.publishing.Lock()
	var os []*durablev1.PolicyOverride
	err := e.store.View(func(tx Tx) error {
		var err error
		os, err = tx.PolicyOverrides()
		return err
	})
	if err != nil {
		e.publishing.Unlock()
		e.opts.Logger.Warn("reading the policy overrides another node changed", "err", err)
		return
	}
	old := e.overrideTable()
	now := overrideTable(nil).with(os)
	var changed []*durablev1.PolicyOverride
	types := map[string]bool{}
	for k, o := range now {
		if !proto.Equal(old[k], o) {
			changed = append(changed, proto.CloneOf(o))
			types[k.activityType] = true
		}
	}
	for k, o := range old {
		if now[k] == nil {
			gone := proto.CloneOf(o)
			gone.Cleared = true
			changed = append(changed, gone)
			types[k.activityType] = true
		}
	}
	e.mu.Lock()
	e.overrides.Store(&now)
	if len(changed) > 0 && len(e.watchers) > 0 {
		e.publishLocked(&change{overrides: changed})
	}
	e.mu.Unlock()
	e.publishing.Unlock()
	for typ := range types {
		e.followOverride(typ)
	}
}
