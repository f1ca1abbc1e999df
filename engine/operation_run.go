package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// The runtime of operations (the rules are in operation.go): RedriveDeadLetters
// writes the work list and the record and answers at once; one goroutine,
// the releaser, releases what is due of every running operation in one
// transaction per round; New resumes the running ones.

const (
	// opItemChunk bounds the work items one transaction of a start writes.
	opItemChunk = 5000
	// maxReleasesPerTx bounds the letters one release transaction puts back,
	// all operations together, so that a transaction stays well under the
	// store's size limit even with large payloads.
	maxReleasesPerTx = 64
	// opRetryAfter is how long an operation whose release failed waits
	// before it tries again.
	opRetryAfter = time.Second
	// opPurgeBatch bounds the work items one purge transaction deletes.
	opPurgeBatch = 1000
	// previewLetters bounds the letters a dry run shows.
	previewLetters = 100
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

// RedriveDeadLetters starts a redrive operation and answers at once: the
// letters a filter matches (oldest first) or the listed ones that are
// dead-lettered now go into the operation's work list, and the releaser
// puts them back at the requested rate from then on. The audit record of
// the start is written with the operation and counts up as letters go out.
// With dry_run it only says how many would match and shows the first ones.
func (e *Engine) RedriveDeadLetters(ctx context.Context, by Actor, req *durablev1.RedriveDeadLettersRequest) (*durablev1.RedriveDeadLettersResponse, error) {
	if req.GetDryRun() {
		return e.previewRedrive(req)
	}
	refs, err := e.selectDeadLetters(req, nil)
	if err != nil {
		return nil, err
	}
	rate := req.GetRate()
	if rate <= 0 {
		rate = DefaultRedriveRate
	}
	tmpl := &durablev1.Operation{
		Kind: opKindRedrive, Principal: by.Principal, Role: by.Role, Reason: req.GetReason(),
		Listed: len(req.GetActivities()) > 0, Rate: rate, Edit: cloneEdit(req.GetEdit()), Matched: int64(len(refs)),
	}
	if !tmpl.Listed {
		tmpl.Filter = proto.Clone(orEmpty(req.GetFilter())).(*durablev1.DeadLetterFilter)
	}
	// The work list goes in bounded transactions; until the last one, which
	// also writes the audit record and makes the operation RUNNING, the
	// record says it is being prepared, and a restart deletes it.
	var seq int64
	var op *durablev1.Operation
	for from := 0; ; from += opItemChunk {
		chunk := refs[from:min(from+opItemChunk, len(refs))]
		last := from+opItemChunk >= len(refs)
		fn := func(tx Tx, c *change) error {
			if seq == 0 {
				e.opSeq++
				seq = e.opSeq
			}
			r := &durablev1.OperationRecord{Seq: seq, Operation: proto.Clone(tmpl).(*durablev1.Operation)}
			r.Operation.Id = OperationID(seq)
			if err := tx.PutOperationItems(seq, int64(from), chunk); err != nil {
				return err
			}
			if last {
				if err := e.startOperation(tx, c, r, by, e.now()); err != nil {
					return err
				}
			}
			op = proto.Clone(r.GetOperation()).(*durablev1.Operation)
			return tx.PutOperation(r)
		}
		if last {
			err = e.commit(fn)
		} else {
			err = e.update(fn)
		}
		if err != nil {
			if seq != 0 {
				e.queuePurge(seq)
			}
			return nil, err
		}
		if last {
			break
		}
	}
	if op.GetState() == opRunning {
		e.mu.Lock()
		e.ops[seq] = &opRun{seq: seq, limit: maxReleasesPerTx,
			pace: pace{origin: op.GetStartedTime().AsTime(), rate: rate, total: op.GetMatched()}}
		e.mu.Unlock()
		e.wakeOps()
	}
	return &durablev1.RedriveDeadLettersResponse{Matched: op.GetMatched(), AuditId: op.GetAuditId(), Operation: op}, nil
}

// startOperation makes a prepared operation RUNNING (or COMPLETED, when it
// matched nothing) and writes the audit record of its start.
func (e *Engine) startOperation(tx Tx, c *change, r *durablev1.OperationRecord, by Actor, now time.Time) error {
	op := r.GetOperation()
	op.State = opRunning
	op.StartedTime = ts(now)
	op.Left = op.GetMatched()
	rec := e.newAudit(c, by, "RedriveDeadLetters", op.GetReason(), now)
	rec.OperationId = op.GetId()
	rec.Matched = op.GetMatched()
	rec.Edit = cloneEdit(op.GetEdit())
	if f := op.GetFilter(); f != nil {
		rec.Filter = proto.Clone(f).(*durablev1.DeadLetterFilter)
	}
	op.AuditId = rec.GetId()
	if op.GetMatched() == 0 {
		op.State = opCompleted
		op.FinishedTime = ts(now)
		r.ItemsDeleted = true
		rec.Done = true
	}
	c.operation(op)
	return e.writeAudit(tx, c, rec, true)
}

// previewRedrive is a dry run: what a redrive operation would select now.
func (e *Engine) previewRedrive(req *durablev1.RedriveDeadLettersRequest) (*durablev1.RedriveDeadLettersResponse, error) {
	resp := &durablev1.RedriveDeadLettersResponse{}
	refs, err := e.selectDeadLetters(req, func(in *durablev1.PendingActivity) {
		if len(resp.Preview) < previewLetters {
			resp.Preview = append(resp.Preview, in)
		}
	})
	if err != nil {
		return nil, err
	}
	resp.Matched = int64(len(refs))
	return resp, nil
}

// selectDeadLetters returns the letters a redrive operation works through:
// the listed ones that are dead-lettered now (each once, in the order
// given), or those the filter matches, oldest first. visit, if set, sees
// each selected letter.
func (e *Engine) selectDeadLetters(req *durablev1.RedriveDeadLettersRequest, visit func(*durablev1.PendingActivity)) ([]*durablev1.ActivityRef, error) {
	var refs []*durablev1.ActivityRef
	add := func(in *durablev1.PendingActivity) {
		refs = append(refs, refOf(in))
		if visit != nil {
			visit(in)
		}
	}
	err := e.view(func(tx Tx) error {
		if list := req.GetActivities(); len(list) > 0 {
			seen := make(map[[2]string]bool, len(list))
			for _, r := range list {
				k := [2]string{r.GetWorkflowId(), r.GetActivityId()}
				if seen[k] {
					continue
				}
				seen[k] = true
				a, err := tx.GetActivity(r.GetWorkflowId(), r.GetActivityId())
				switch {
				case errors.Is(err, ErrNotFound):
					continue
				case err != nil:
					return err
				}
				if IsDeadLetter(a) {
					add(a.GetInfo())
				}
			}
			return nil
		}
		f := req.GetFilter()
		_, err := tx.DeadLetters(nil, func(a *durablev1.ActivityRecord) bool {
			in := a.GetInfo()
			if pastDeadLetterWindow(in, f) {
				return false
			}
			if matchesDeadLetter(in, f) {
				add(in)
			}
			return true
		})
		return err
	})
	return refs, err
}

// CancelOperation stops a running operation in one transaction, with an
// audit record of its own: what it released stays released, the rest stays
// in the dead-letter queue. Once it returns, no release of the operation
// can commit. An operation that has finished is ErrOperationFinished.
func (e *Engine) CancelOperation(ctx context.Context, by Actor, req *durablev1.CancelOperationRequest) (*durablev1.Operation, error) {
	seq, ok := operationSeq(req.GetId())
	if !ok {
		return nil, fmt.Errorf("operation %q: %w", req.GetId(), ErrNotFound)
	}
	var out *durablev1.Operation
	err := e.commit(func(tx Tx, c *change) error {
		r, err := tx.GetOperation(seq)
		if err != nil {
			return err
		}
		now := e.now()
		if err := cancel(r, by, req.GetReason(), now); err != nil {
			return err
		}
		op := r.GetOperation()
		if err := e.finishAudit(tx, c, op, false); err != nil {
			return err
		}
		rec := e.newAudit(c, by, "CancelOperation", req.GetReason(), now)
		rec.OperationId = op.GetId()
		rec.Matched, rec.Count, rec.Done = op.GetMatched(), op.GetLeft(), true
		if f := op.GetFilter(); f != nil {
			rec.Filter = proto.Clone(f).(*durablev1.DeadLetterFilter)
		}
		if err := e.writeAudit(tx, c, rec, true); err != nil {
			return err
		}
		if err := tx.PutOperation(r); err != nil {
			return err
		}
		c.operation(op)
		out = proto.Clone(op).(*durablev1.Operation)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if _, ok := e.ops[seq]; ok {
		delete(e.ops, seq)
		e.opsPurge = append(e.opsPurge, seq)
	}
	e.mu.Unlock()
	e.wakeOps()
	return out, nil
}

// finishAudit brings the audit record of an operation's start up to date
// with the operation: the count released, done once it has finished. A
// record the audit retention has deleted stays deleted.
func (e *Engine) finishAudit(tx Tx, c *change, op *durablev1.Operation, log bool) error {
	rec, err := tx.GetAudit(op.GetStartedTime().AsTime(), op.GetAuditId())
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	rec.Count = op.GetReleased()
	rec.Done = op.GetState() != opRunning
	return e.writeAudit(tx, c, rec, log)
}

// DescribeOperation returns one operation and its progress.
func (e *Engine) DescribeOperation(ctx context.Context, req *durablev1.DescribeOperationRequest) (*durablev1.Operation, error) {
	seq, ok := operationSeq(req.GetId())
	if !ok {
		return nil, fmt.Errorf("operation %q: %w", req.GetId(), ErrNotFound)
	}
	var op *durablev1.Operation
	err := e.store.View(func(tx Tx) error {
		r, err := tx.GetOperation(seq)
		if err != nil {
			return err
		}
		if r.GetOperation().GetState() == opPreparing {
			return fmt.Errorf("operation %q: %w", req.GetId(), ErrNotFound)
		}
		op = r.GetOperation()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return op, nil
}

// ListOperations pages through operations, newest first.
func (e *Engine) ListOperations(ctx context.Context, req *durablev1.ListOperationsRequest) (*durablev1.ListOperationsResponse, error) {
	size := pageSize(req.GetPageSize())
	resp := &durablev1.ListOperationsResponse{}
	err := e.store.View(func(tx Tx) error {
		last, err := tx.Operations(req.GetNextPageToken(), func(r *durablev1.OperationRecord) bool {
			if r.GetOperation().GetState() != opPreparing {
				resp.Operations = append(resp.Operations, r.GetOperation())
			}
			return len(resp.Operations) < size
		})
		if err != nil {
			return err
		}
		if len(resp.Operations) == size {
			resp.NextPageToken = last
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
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
			e.ops[r.GetSeq()] = &opRun{seq: r.GetSeq(), next: r.GetNext(), limit: maxReleasesPerTx,
				pace: pace{origin: now, base: r.GetNext(), rate: op.GetRate(), total: op.GetMatched()}}
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
		now := e.now()
		e.mu.Lock()
		work, wake := e.dueWorkLocked(now)
		purge := len(work) == 0 && len(e.opsPurge) > 0
		e.mu.Unlock()
		switch {
		case len(work) > 0:
			if errors.Is(e.release(work, now), ErrClosed) {
				return
			}
			continue
		case purge:
			if errors.Is(e.purgeStep(), ErrClosed) {
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
	type result struct {
		state durablev1.OperationState
		next  int64
	}
	results := make([]result, len(work))
	err := e.commit(func(tx Tx, c *change) error {
		now := e.now()
		for i, w := range work {
			state, next, err := e.releaseNext(tx, c, w.seq, w.n, now)
			if err != nil {
				return err
			}
			results[i] = result{state, next}
		}
		return nil
	})
	if errors.Is(err, ErrClosed) {
		return err
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

// releaseNext releases up to n letters of operation seq, in the release
// transaction: unless the operation has stopped running, each next item of
// its work list is redriven if it is still dead-lettered and skipped if
// not, and the cursor, the counters and the audit record move with them.
// It returns the operation's state and cursor after.
func (e *Engine) releaseNext(tx Tx, c *change, seq, n int64, now time.Time) (durablev1.OperationState, int64, error) {
	r, err := tx.GetOperation(seq)
	if errors.Is(err, ErrNotFound) {
		return opPreparing, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	op := r.GetOperation()
	if op.GetState() != opRunning {
		return op.GetState(), r.GetNext(), nil
	}
	refs, err := tx.OperationItems(seq, r.GetNext(), int(n))
	if err != nil {
		return 0, 0, err
	}
	if int64(len(refs)) < min(n, op.GetMatched()-r.GetNext()) {
		return 0, 0, fmt.Errorf("work list of %s ends at item %d of %d", op.GetId(), r.GetNext()+int64(len(refs)), op.GetMatched())
	}
	audit, err := tx.GetAudit(op.GetStartedTime().AsTime(), op.GetAuditId())
	switch {
	case errors.Is(err, ErrNotFound):
		audit = nil // deleted by the audit retention
	case err != nil:
		return 0, 0, err
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
			return 0, 0, err
		default:
			advance(r, released, now)
			if audit != nil && len(audit.Activities) < auditListedActivities {
				audit.Activities = append(audit.Activities, refOf(in))
			}
		}
	}
	if err := tx.PutOperation(r); err != nil {
		return 0, 0, err
	}
	if audit != nil {
		audit.Count = op.GetReleased()
		audit.Done = op.GetState() != opRunning
		if err := e.writeAudit(tx, c, audit, audit.Done); err != nil {
			return 0, 0, err
		}
	}
	c.operation(op)
	return op.GetState(), r.GetNext(), nil
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
	if errors.Is(err, ErrClosed) {
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
