package engine

import (
	"context"
	"errors"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// DefaultRedriveRate is how many letters per second a bulk redrive releases
// when the request does not say.
const DefaultRedriveRate = 50

// maxListedRedrives bounds the letters a bulk redrive's reply names.
const maxListedRedrives = 10000

// RedriveDeadLetter puts a dead letter back in its queue as attempt 1, due
// now, with a fresh schedule-to-close budget. Its heartbeat details stay, so a
// resumable activity continues from its last checkpoint. The audit record of
// the redrive is written in the same transaction.
func (e *Engine) RedriveDeadLetter(ctx context.Context, by Actor, req *durablev1.RedriveDeadLetterRequest) (*durablev1.RedriveDeadLetterResponse, error) {
	resp := &durablev1.RedriveDeadLetterResponse{}
	err := e.commit(func(tx Tx, c *change) error {
		now := e.now()
		in, err := e.redrive(tx, c, req.GetWorkflowId(), req.GetActivityId(), by, req.GetReason(), now)
		if err != nil {
			return err
		}
		rec := e.newAudit(c, by, "RedriveDeadLetter", req.GetReason(), now)
		rec.Matched, rec.Count, rec.Done = 1, 1, true
		rec.Activities = []*durablev1.ActivityRef{{WorkflowId: in.GetWorkflowId(), ActivityId: in.GetActivityId()}}
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

// redrive is one dead letter's way back to attempt 1, with an
// ActivityRedriven event that names who asked and why.
func (e *Engine) redrive(tx Tx, c *change, workflowID, activityID string, by Actor, reason string, now time.Time) (*durablev1.PendingActivity, error) {
	a, err := tx.GetActivity(workflowID, activityID)
	if err != nil {
		return nil, err
	}
	in := a.GetInfo()
	if in.GetState() != stateDead {
		return nil, ErrNotDeadLettered
	}
	w, err := tx.GetWorkflow(in.GetWorkflowId())
	if err != nil {
		return nil, err
	}
	in.State = stateScheduled
	in.Attempt = 1
	in.ScheduledTime = ts(now)
	in.NextAttemptTime = ts(now)
	in.DeadLetteredTime = nil
	in.Redrives++
	in.ExpirationTime = nil
	if stc := in.GetOptions().GetScheduleToCloseTimeout().AsDuration(); stc > 0 {
		in.ExpirationTime = ts(now.Add(stc))
	}
	a.Seq = e.nextID(c)
	w.Info.DeadLetters--
	e.appendEvents(tx, w, now, &durablev1.HistoryEvent{
		Type: evActivityRedriven, ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType(),
		ScheduledEventId: a.GetScheduledEventId(), Principal: by.Principal, Reason: reason,
	})
	if err := tx.PutActivity(a); err != nil {
		return nil, err
	}
	if err := tx.PutWorkflow(w); err != nil {
		return nil, err
	}
	e.noteQueued(c, a, true)
	c.upsert(in)
	c.workflow(w)
	c.observe(observation{kind: obsRedriven, activityType: in.GetActivityType()})
	return in, nil
}

// RedriveDeadLetters redrives the letters a filter matches when the call
// starts (or exactly the ones listed), letter i due i/rate seconds after the
// first, so that an outage's thousand letters reach the workers as a steady
// stream rather than a herd. Each letter goes back in a transaction of its
// own that also advances the call's audit record, written first with who,
// why and what was selected: whatever happens to the call, the record says
// how far it got. Letters no longer dead-lettered when their turn comes are
// skipped. It returns when every letter is released, or with what was
// released so far when ctx ends or the engine closes.
func (e *Engine) RedriveDeadLetters(ctx context.Context, by Actor, req *durablev1.RedriveDeadLettersRequest) (*durablev1.RedriveDeadLettersResponse, error) {
	refs, err := e.selectDeadLetters(req)
	if err != nil {
		return nil, err
	}
	rate := req.GetRate()
	if rate <= 0 {
		rate = DefaultRedriveRate
	}
	resp := &durablev1.RedriveDeadLettersResponse{Matched: int64(len(refs))}
	var rec *durablev1.AuditRecord
	err = e.commit(func(tx Tx, c *change) error {
		rec = e.newAudit(c, by, "RedriveDeadLetters", req.GetReason(), e.now())
		if len(req.GetActivities()) == 0 {
			rec.Filter = proto.Clone(orEmpty(req.GetFilter())).(*durablev1.DeadLetterFilter)
		}
		rec.Matched = int64(len(refs))
		rec.Done = len(refs) == 0
		return e.writeAudit(tx, c, cloneAudit(rec), true)
	})
	if err != nil {
		return nil, err
	}
	resp.AuditId = rec.GetId()

	start := e.now()
	due := func(i int) time.Time { return start.Add(time.Duration(float64(i) / rate * float64(time.Second))) }
	for i, ref := range refs {
		if wait := due(i).Sub(e.now()); wait > 0 {
			select {
			case <-e.clock.After(wait):
			case <-ctx.Done():
				return resp, ctx.Err()
			case <-e.closeCh:
				return resp, ErrClosed
			}
		}
		last := i == len(refs)-1
		next := cloneAudit(rec)
		next.Count++
		if len(next.Activities) < auditListedActivities {
			next.Activities = append(next.Activities, ref)
		}
		next.Done = last
		// Only the last letter due now waits for the disk: the store syncs
		// in commit order, so its sync covers the ones before it.
		durable := last || due(i+1).After(e.now())
		var skipped bool
		var activityType string
		err := e.submit(func(tx Tx, c *change) error {
			now := e.now()
			in, err := e.redrive(tx, c, ref.GetWorkflowId(), ref.GetActivityId(), by, req.GetReason(), now)
			activityType = in.GetActivityType()
			skipped = errors.Is(err, ErrNotDeadLettered) || errors.Is(err, ErrNotFound)
			switch {
			case skipped && !last:
				return nil
			case skipped:
				// Nothing to redrive, but the record must say it is done.
				fin := cloneAudit(rec)
				fin.Done = true
				return e.writeAudit(tx, c, fin, true)
			case err != nil:
				return err
			}
			return e.writeAudit(tx, c, cloneAudit(next), last)
		}, durable)
		if err != nil {
			return resp, err
		}
		if skipped {
			resp.Skipped++
			continue
		}
		rec = next
		resp.Count++
		if len(resp.Redriven) < maxListedRedrives {
			resp.Redriven = append(resp.Redriven, &durablev1.ActivityRef{WorkflowId: ref.GetWorkflowId(), ActivityId: ref.GetActivityId(), ActivityType: activityType})
		}
	}
	return resp, nil
}

// selectDeadLetters returns the letters a bulk redrive works through: the
// listed ones (each once, in the order given), or those matching the filter,
// oldest first.
func (e *Engine) selectDeadLetters(req *durablev1.RedriveDeadLettersRequest) ([]*durablev1.ActivityRef, error) {
	if list := req.GetActivities(); len(list) > 0 {
		seen := make(map[[2]string]bool, len(list))
		var refs []*durablev1.ActivityRef
		for _, r := range list {
			k := [2]string{r.GetWorkflowId(), r.GetActivityId()}
			if !seen[k] {
				seen[k] = true
				refs = append(refs, &durablev1.ActivityRef{WorkflowId: r.GetWorkflowId(), ActivityId: r.GetActivityId()})
			}
		}
		return refs, nil
	}
	var refs []*durablev1.ActivityRef
	f := req.GetFilter()
	err := e.view(func(tx Tx) error {
		_, err := tx.DeadLetters(nil, func(a *durablev1.ActivityRecord) bool {
			if in := a.GetInfo(); matchesDeadLetter(in, f) {
				refs = append(refs, &durablev1.ActivityRef{WorkflowId: in.GetWorkflowId(), ActivityId: in.GetActivityId()})
			}
			return true
		})
		return err
	})
	return refs, err
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
	}
	return true
}

func orEmpty(f *durablev1.DeadLetterFilter) *durablev1.DeadLetterFilter {
	if f == nil {
		return &durablev1.DeadLetterFilter{}
	}
	return f
}
