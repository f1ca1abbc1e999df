package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// The calls on operations (the rules are in operation.go, the goroutine
// that releases their letters in releaser.go): RedriveDeadLetters writes the
// work list and the record and answers at once; describe, list and cancel.

const (
	// opItemChunk bounds the work items one transaction of a start writes.
	opItemChunk = 5000
	// previewLetters bounds the letters a dry run shows.
	previewLetters = 100
)

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
				seq = e.rt.nextOpSeq(c)
			}
			r := &durablev1.OperationRecord{Seq: seq, Operation: proto.Clone(tmpl).(*durablev1.Operation), Node: e.rt.node()}
			r.Operation.Id, r.Operation.Node = OperationID(seq), r.GetNode()
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
			e.showInForce(in)
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
		// The dead-lettered time bounds are a range of the index: seek.
		_, err := tx.DeadLettersIn(deadLetteredRange(f), nil, func(a *durablev1.ActivityRecord) bool {
			in := a.GetInfo()
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
