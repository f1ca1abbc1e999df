package engine

import (
	"context"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// RedriveDeadLetter puts a dead letter back in its queue as attempt 1, due
// now, with a fresh schedule-to-close budget. Its heartbeat details stay, so a
// resumable activity continues from its last checkpoint.
func (e *Engine) RedriveDeadLetter(ctx context.Context, req *durablev1.RedriveDeadLetterRequest) (*durablev1.RedriveDeadLetterResponse, error) {
	resp := &durablev1.RedriveDeadLetterResponse{}
	err := e.commit(func(tx Tx, c *change) error {
		a, err := tx.GetActivity(req.GetWorkflowId(), req.GetActivityId())
		if err != nil {
			return err
		}
		in := a.GetInfo()
		if in.GetState() != stateDead {
			return ErrNotDeadLettered
		}
		w, err := tx.GetWorkflow(in.GetWorkflowId())
		if err != nil {
			return err
		}
		now := e.now()
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
		e.appendEvents(tx, w, now, &durablev1.HistoryEvent{Type: evActivityRedriven, ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType(), ScheduledEventId: a.GetScheduledEventId()})
		if err := tx.PutActivity(a); err != nil {
			return err
		}
		if err := tx.PutWorkflow(w); err != nil {
			return err
		}
		e.noteQueued(c, a, true)
		c.upsert(in)
		c.workflow(w)
		resp.Activity = proto.Clone(in).(*durablev1.PendingActivity)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
