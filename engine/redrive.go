package engine

import (
	"context"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// RedriveDeadLetter puts a dead letter back in its queue as attempt 1, due
// now, with a fresh schedule-to-close budget. Its heartbeat details stay, so a
// resumable activity continues from its last checkpoint. With an edit, the
// activity's options change as it goes back (edit then redrive). The audit
// record of the redrive is written in the same transaction.
func (e *Engine) RedriveDeadLetter(ctx context.Context, by Actor, req *durablev1.RedriveDeadLetterRequest) (*durablev1.RedriveDeadLetterResponse, error) {
	resp := &durablev1.RedriveDeadLetterResponse{}
	err := e.commit(func(tx Tx, c *change) error {
		now := e.now()
		in, err := e.redrive(tx, c, redriveParams{
			workflowID: req.GetWorkflowId(), activityID: req.GetActivityId(),
			by: by, reason: req.GetReason(), edit: req.GetEdit(), now: now,
		})
		if err != nil {
			return err
		}
		rec := e.newAudit(c, by, "RedriveDeadLetter", req.GetReason(), now)
		rec.Matched, rec.Count, rec.Done = 1, 1, true
		rec.Activities = []*durablev1.ActivityRef{refOf(in)}
		rec.Edit = cloneEdit(req.GetEdit())
		if err := e.writeAudit(tx, c, rec, true); err != nil {
			return err
		}
		resp.Activity = proto.Clone(in).(*durablev1.PendingActivity)
		e.showInForce(resp.Activity)
		resp.AuditId = rec.GetId()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// redriveParams is one dead letter's way back and who sent it.
type redriveParams struct {
	workflowID, activityID string
	by                     Actor
	reason                 string
	// edit, if set, changes the activity's options as it goes back.
	edit *durablev1.OptionsPatch
	// operationID is the redrive operation releasing it; empty for a single
	// redrive.
	operationID string
	now         time.Time
}

// redrive is one dead letter's way back to attempt 1, with an
// ActivityRedriven event that names who asked, why, what changed and the
// operation, if any. It returns ErrNotFound or ErrNotDeadLettered before it
// writes anything, so a caller may count those as skipped and go on.
func (e *Engine) redrive(tx Tx, c *change, p redriveParams) (*durablev1.PendingActivity, error) {
	a, err := tx.GetActivity(p.workflowID, p.activityID)
	if err != nil {
		return nil, err
	}
	// A letter redriven already is refused without reading the workflow
	// (the rule refuses it again, on its own): operations skip many.
	if a.GetInfo().GetState() != stateDead {
		return nil, ErrNotDeadLettered
	}
	w, err := tx.GetWorkflow(a.GetInfo().GetWorkflowId())
	if err != nil {
		return nil, err
	}
	env := e.env(c)
	s, err := redriveLetter(a, w, p, &env)
	if err != nil {
		return nil, err
	}
	if err := e.applyStep(tx, c, &s); err != nil {
		return nil, err
	}
	return a.GetInfo(), nil
}

func cloneEdit(p *durablev1.OptionsPatch) *durablev1.OptionsPatch {
	if p == nil {
		return nil
	}
	return proto.Clone(p).(*durablev1.OptionsPatch)
}

func refOf(in *durablev1.PendingActivity) *durablev1.ActivityRef {
	return &durablev1.ActivityRef{WorkflowId: in.GetWorkflowId(), ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType()}
}

// matchesDeadLetter reports whether a letter matches every field of f that
// is set; a nil filter matches every letter.
func matchesDeadLetter(in *durablev1.PendingActivity, f *durablev1.DeadLetterFilter) bool {
	switch {
	case f.GetWorkflowId() != "" && in.GetWorkflowId() != f.GetWorkflowId():
		return false
	case f.GetActivityType() != "" && in.GetActivityType() != f.GetActivityType():
		return false
	case f.GetFailureType() != "" && in.GetLastFailure().GetType() != f.GetFailureType():
		return false
	case f.GetFailureFingerprint() != "" && fingerprintOf(in) != f.GetFailureFingerprint():
		return false
	case !deadLetteredRange(f).Contains(in.GetDeadLetteredTime().AsTime()):
		return false
	}
	return true
}

func orEmpty(f *durablev1.DeadLetterFilter) *durablev1.DeadLetterFilter {
	if f == nil {
		return &durablev1.DeadLetterFilter{}
	}
	return f
}
