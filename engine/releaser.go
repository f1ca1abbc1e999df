package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The releaser is the goroutine that puts back the letters of running
// redrive operations as they come due (the pacing rule is pace, in
// operation.go). New loads the operations from the store and resumes the
// running ones, paced from then; the releaser also deletes the work lists
// of finished operations, a bounded batch at a time, between rounds.

const (
	// maxReleasesPerTx bounds the letters one release transaction puts back,
	// all operations together, so that a transaction stays well under the
	// store's size limit even with large payloads.
	maxReleasesPerTx = 64
	// opRetryAfter is how long an operation whose release failed waits
	// before it tries again.
	opRetryAfter = time.Second
	// opPurgeBatch bounds the work items one purge transaction deletes.
	opPurgeBatch = 1000
)

// opRun is a running operation as the releaser sees it. The record is the
// truth; this is only what the releaser needs to know when to look.
type opRun struct {
	seq  int64
	pace pace
	// next is the cursor after the last release that committed.
	next int64
	// limit bounds its next release transaction: halved after one failed,
	// doubled back after one committed.
	limit int64
	// notBefore holds it back after a release failed.
	notBefore time.Time
}

// opWork is one operation's share of a release transaction.
type opWork struct {
	seq int64
	n   int64
}

// loadOperations reads every operation record at start: running ones are
// resumed with their pacing measured from now, prepared ones that never
// started and the work lists of finished ones are queued for deletion.
func (e *Engine) loadOperations(tx Tx) error {
	now := e.now()
	_, err := tx.Operations(nil, func(r *durablev1.OperationRecord) bool {
		e.opSeq = max(e.opSeq, r.GetSeq())
		op := r.GetOperation()
		switch op.GetState() {
		case opRunning:
			e.ops[r.GetSeq()] = resumed(r, now)
		case opPreparing:
			e.opsPurge = append(e.opsPurge, r.GetSeq())
		default:
			if !r.GetItemsDeleted() {
				e.opsPurge = append(e.opsPurge, r.GetSeq())
			}
		}
		return true
	})
	return err
}

// resumed is the run of a running operation that this engine goes on with
// from its record: paced from now, from the letters already released.
func resumed(r *durablev1.OperationRecord, now time.Time) *opRun {
	op := r.GetOperation()
	return &opRun{seq: r.GetSeq(), next: r.GetNext(), limit: maxReleasesPerTx,
		pace: pace{origin: now, base: r.GetNext(), rate: op.GetRate(), total: op.GetMatched()}}
}

func (e *Engine) wakeOps() {
	select {
	case e.opsWake <- struct{}{}:
	default:
	}
}

func (e *Engine) queuePurge(seq int64) {
	e.mu.Lock()
	e.opsPurge = append(e.opsPurge, seq)
	e.mu.Unlock()
	e.wakeOps()
}

// releaser is the goroutine that releases the letters of running
// operations as they come due, all that are due in one transaction (up to
// maxReleasesPerTx), and between rounds deletes the work lists of finished
// ones. It sleeps until the next letter is due.
func (e *Engine) releaser() {
	defer close(e.opsDone)
	for {
		// While writes are refused, releases and purges wait.
		if !e.waitWritable() {
			return
		}
		now := e.now()
		e.mu.Lock()
		work, wake := e.dueWorkLocked(now)
		purge := len(work) == 0 && len(e.opsPurge) > 0
		e.mu.Unlock()
		switch {
		case len(work) > 0:
			if !e.pauseAfter(e.release(work, now)) {
				return
			}
			continue
		case purge:
			if !e.pauseAfter(e.purgeStep()) {
				return
			}
			continue
		}
		var timer <-chan time.Time
		if !wake.IsZero() {
			timer = e.clock.After(max(wake.Sub(now), time.Nanosecond))
		}
		select {
		case <-e.closeCh:
			return
		case <-e.opsWake:
		case <-timer:
		}
	}
}

// dueWorkLocked says what to release now, lowest operation first, and when
// the next letter after that comes due.
func (e *Engine) dueWorkLocked(now time.Time) ([]opWork, time.Time) {
	var work []opWork
	var wake time.Time
	earlier := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	runs := make([]*opRun, 0, len(e.ops))
	for _, r := range e.ops {
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b *opRun) int { return cmp.Compare(a.seq, b.seq) })
	budget := int64(maxReleasesPerTx)
	for _, r := range runs {
		if now.Before(r.notBefore) {
			earlier(r.notBefore)
			continue
		}
		due := r.pace.due(now)
		if n := min(due-r.next, r.limit, budget); n > 0 {
			work = append(work, opWork{seq: r.seq, n: n})
			budget -= n
		}
		if due < r.pace.total {
			earlier(r.pace.at(due))
		}
	}
	return work, wake
}

// release runs one release transaction for work and tells the runs how it
// went.
func (e *Engine) release(work []opWork, now time.Time) error {
	results := make([]releaseResult, len(work))
	err := e.commit(func(tx Tx, c *change) error {
		now := e.now()
		for i, w := range work {
			var err error
			if results[i], err = e.releaseNext(tx, c, w.seq, w.n, now); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, ErrClosed) || refused(err) {
		return err // a refusal is waited out: the same work is due again
	}
	if err != nil {
		e.opts.Logger.Error("releasing letters of a redrive operation", "err", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, w := range work {
		r := e.ops[w.seq]
		if r == nil {
			continue // cancelled meanwhile
		}
		switch {
		case err != nil && w.n > 1:
			r.limit = max(1, w.n/2)
		case err != nil:
			r.notBefore = now.Add(opRetryAfter)
		case results[i].node != e.rt.node():
			// Another node took it over while this one was thought dead
			// (runtime_shared.go): it runs it from here, and its work list
			// is not this node's to delete.
			delete(e.ops, w.seq)
			e.opts.Logger.Warn("a redrive operation this node ran was taken over by another node; leaving it to that node",
				"operation_id", OperationID(w.seq), "node", e.rt.node(), "taken_by", results[i].node)
		case results[i].state != opRunning:
			delete(e.ops, w.seq)
			e.opsPurge = append(e.opsPurge, w.seq)
		default:
			r.next = results[i].next
			r.limit = min(2*r.limit, maxReleasesPerTx)
		}
	}
	return err
}

// releaseResult is what a release transaction found of one operation: its
// state and cursor after, and the node that runs it.
type releaseResult struct {
	state durablev1.OperationState
	next  int64
	node  string
}

// releaseNext releases up to n letters of operation seq, in the release
// transaction: unless the operation has stopped running or another node
// runs it now, each next item of its work list is redriven if it is still
// dead-lettered and skipped if not, and the cursor, the counters and the
// audit record move with them.
func (e *Engine) releaseNext(tx Tx, c *change, seq, n int64, now time.Time) (releaseResult, error) {
	r, err := tx.GetOperation(seq)
	if errors.Is(err, ErrNotFound) {
		return releaseResult{state: opPreparing, node: e.rt.node()}, nil
	}
	if err != nil {
		return releaseResult{}, err
	}
	op := r.GetOperation()
	out := releaseResult{state: op.GetState(), next: r.GetNext(), node: r.GetNode()}
	if op.GetState() != opRunning || r.GetNode() != e.rt.node() {
		return out, nil
	}
	refs, err := tx.OperationItems(seq, r.GetNext(), int(n))
	if err != nil {
		return releaseResult{}, err
	}
	if int64(len(refs)) < min(n, op.GetMatched()-r.GetNext()) {
		return releaseResult{}, fmt.Errorf("work list of %s ends at item %d of %d", op.GetId(), r.GetNext()+int64(len(refs)), op.GetMatched())
	}
	audit, err := tx.GetAudit(op.GetStartedTime().AsTime(), op.GetAuditId())
	switch {
	case errors.Is(err, ErrNotFound):
		audit = nil // deleted by the audit retention
	case err != nil:
		return releaseResult{}, err
	}
	by := Actor{Principal: op.GetPrincipal(), Role: op.GetRole()}
	for _, ref := range refs {
		in, err := e.redrive(tx, c, redriveParams{
			workflowID: ref.GetWorkflowId(), activityID: ref.GetActivityId(), by: by, reason: op.GetReason(),
			edit: op.GetEdit(), operationID: op.GetId(), now: now,
		})
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrNotDeadLettered):
			advance(r, skipped, now)
		case err != nil:
			return releaseResult{}, err
		default:
			advance(r, released, now)
			if audit != nil && len(audit.Activities) < auditListedActivities {
				audit.Activities = append(audit.Activities, refOf(in))
			}
		}
	}
	if err := tx.PutOperation(r); err != nil {
		return releaseResult{}, err
	}
	if audit != nil {
		audit.Count = op.GetReleased()
		audit.Done = op.GetState() != opRunning
		if err := e.writeAudit(tx, c, audit, audit.Done); err != nil {
			return releaseResult{}, err
		}
	}
	c.operation(op)
	out.state, out.next = op.GetState(), r.GetNext()
	return out, nil
}

// countReDeadLetter counts a letter that an operation released and that has
// dead-lettered again on that operation; it is never redriven again by it.
func (e *Engine) countReDeadLetter(tx Tx, c *change, operationID string) error {
	seq, ok := operationSeq(operationID)
	if !ok {
		return nil
	}
	r, err := tx.GetOperation(seq)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	r.Operation.ReDeadLettered++
	if err := tx.PutOperation(r); err != nil {
		return err
	}
	c.operation(r.GetOperation())
	return nil
}

// purgeStep deletes a bounded batch of the work list of the first operation
// queued for it; once the list is gone, the record of an operation that was
// never acknowledged goes too, and that of a finished one says so.
// Nothing waits for the disk: a purge lost in a crash is queued again at
// start.
func (e *Engine) purgeStep() error {
	e.mu.Lock()
	seq := e.opsPurge[0]
	e.mu.Unlock()
	gone := false
	err := e.update(func(tx Tx, c *change) error {
		n, err := tx.DeleteOperationItems(seq, opPurgeBatch)
		if err != nil || n == opPurgeBatch {
			gone = false
			return err
		}
		gone = true
		r, err := tx.GetOperation(seq)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		switch r.GetOperation().GetState() {
		case opPreparing:
			return tx.DeleteOperation(seq)
		case opRunning:
			return nil
		}
		r.ItemsDeleted = true
		return tx.PutOperation(r)
	})
	if errors.Is(err, ErrClosed) || refused(err) {
		return err
	}
	if err != nil {
		// Left for the next start to try again.
		e.opts.Logger.Error("deleting the work list of an operation", "operation_id", OperationID(seq), "err", err)
		gone = true
	}
	if gone {
		e.mu.Lock()
		e.opsPurge = e.opsPurge[1:]
		e.mu.Unlock()
	}
	return nil
}
