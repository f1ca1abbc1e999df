package engine

import (
	"context"
	"errors"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const (
	stateScheduled = durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED
	stateStarted   = durablev1.ActivityState_ACTIVITY_STATE_STARTED
	stateRetrying  = durablev1.ActivityState_ACTIVITY_STATE_RETRYING
	stateDead      = durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
)

// PollActivityTask leases up to max_tasks due attempts from a queue, waiting
// for one up to the poll timeout. The lease is not synced before the reply: if
// the daemon dies, the attempt is delivered again. While writes are refused
// it hands out nothing (a lease is a write) and waits as if the queue were
// empty; it looks again as soon as they are allowed.
func (e *Engine) PollActivityTask(ctx context.Context, req *durablev1.PollActivityTaskRequest) (*durablev1.PollActivityTaskResponse, error) {
	max := int(req.GetMaxTasks())
	if max <= 0 {
		max = 1
	}
	resp := &durablev1.PollActivityTaskResponse{}
	k := queueKey{ActivityTask, req.GetTaskQueue()}
	err := e.longPoll(ctx, k, req.GetIdentity(), func(now time.Time) (bool, time.Time, error) {
		if e.gate.err() != nil {
			return false, time.Time{}, nil
		}
		var tasks []*durablev1.ActivityTask
		var taken []QueueEntry
		ok, next, err := e.rt.take(k, now, max, func(tx Tx, c *change, entries []QueueEntry) (int, error) {
			tasks, taken = tasks[:0], entries
			// The leases count from this run of their transaction, not
			// from when the poll looked (see PollWorkflowTask).
			now := e.now()
			for _, q := range entries {
				t, err := e.leaseActivity(tx, c, q, req.GetIdentity(), now)
				if errors.Is(err, errStaleEntry) {
					continue
				}
				if err != nil {
					return 0, err
				}
				tasks = append(tasks, t)
			}
			return len(tasks), nil
		})
		if err != nil {
			if refused(err) {
				return false, time.Time{}, nil
			}
			return false, time.Time{}, err
		}
		if ok && e.awaitDurable(taken) != nil {
			return false, time.Time{}, nil // its sync failed: see handout.go
		}
		if ok {
			resp.Tasks = tasks
		}
		return ok, next, nil
	})
	return resp, err
}

// errStaleEntry marks a queue entry whose record has moved on since it was
// queued; the poll skips it.
var errStaleEntry = errors.New("stale queue entry")

// restore puts back entries taken by a poll whose transaction failed, so the
// tasks stay pollable.
func (e *Engine) restore(entries []QueueEntry) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, q := range entries {
		e.pushEntryLocked(q)
	}
}

func (e *Engine) leaseActivity(tx Tx, c *change, q QueueEntry, identity string, now time.Time) (*durablev1.ActivityTask, error) {
	a, err := tx.GetActivity(q.WorkflowID, q.ActivityID)
	if errors.Is(err, ErrNotFound) {
		return nil, errStaleEntry
	}
	if err != nil {
		return nil, err
	}
	env := e.env(c)
	s, task, err := leaseActivity(a, q, identity, now, &env)
	if err != nil {
		return nil, err
	}
	if err := e.applyStep(tx, c, &s); err != nil {
		return nil, err
	}
	return task, nil
}

// leased loads the activity a token names; the rule it goes to checks that
// the lease is the live one (liveLease).
func leased(tx Tx, token []byte) (*durablev1.ActivityRecord, *durablev1.TaskToken, error) {
	t, err := DecodeToken(token)
	if err != nil {
		return nil, nil, err
	}
	if t.GetActivityId() == "" {
		return nil, nil, invalid("task_token", "is a workflow task token, not an activity task token")
	}
	a, err := tx.GetActivity(t.GetWorkflowId(), t.GetActivityId())
	if errors.Is(err, ErrNotFound) {
		// The activity finished, or its workflow closed, or it never was.
		if _, werr := tx.GetWorkflow(t.GetWorkflowId()); werr == nil {
			return nil, nil, ErrStaleTask
		}
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	return a, t, nil
}

// leasedWithWorkflow is leased, and the workflow of the activity.
func leasedWithWorkflow(tx Tx, token []byte) (*durablev1.ActivityRecord, *durablev1.WorkflowRecord, *durablev1.TaskToken, error) {
	a, t, err := leased(tx, token)
	if err != nil {
		return nil, nil, nil, err
	}
	// A stale token is refused without reading the workflow (the rule
	// refuses it again, on its own).
	if err := liveLease(a, t); err != nil {
		return nil, nil, nil, err
	}
	w, err := tx.GetWorkflow(a.GetInfo().GetWorkflowId())
	if err != nil {
		return nil, nil, nil, err
	}
	return a, w, t, nil
}

// CompleteActivityTask records the result of a leased attempt and wakes the
// workflow (completeActivity).
func (e *Engine) CompleteActivityTask(ctx context.Context, req *durablev1.CompleteActivityTaskRequest) (*durablev1.Empty, error) {
	err := e.commitReading(tokenReads(req.GetTaskToken(), true), func(tx Tx, c *change) error {
		a, w, t, err := leasedWithWorkflow(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		env := e.env(c)
		s, err := completeActivity(a, w, t, req, e.now(), &env)
		if err != nil {
			return err
		}
		return e.applyStep(tx, c, &s)
	})
	return &durablev1.Empty{}, err
}

// FailActivityTask reports a failed attempt; Decide says what follows
// (failActivity).
func (e *Engine) FailActivityTask(ctx context.Context, req *durablev1.FailActivityRequest) (*durablev1.Empty, error) {
	err := e.commitReading(tokenReads(req.GetTaskToken(), true), func(tx Tx, c *change) error {
		a, w, t, err := leasedWithWorkflow(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		f := req.GetFailure()
		if f == nil {
			f = systemFailure(activity.TypeUnknown, "the worker reported no failure")
		}
		env := e.env(c)
		s, err := failActivity(a, w, t, f, e.now(), &env)
		if err != nil {
			return err
		}
		return e.applyStep(tx, c, &s)
	})
	return &durablev1.Empty{}, err
}

// RecordHeartbeat moves the lease deadline and stores the details as the
// checkpoint the next attempt receives (recordHeartbeat).
func (e *Engine) RecordHeartbeat(ctx context.Context, req *durablev1.HeartbeatRequest) (*durablev1.HeartbeatResponse, error) {
	resp := &durablev1.HeartbeatResponse{}
	err := e.commitReading(tokenReads(req.GetTaskToken(), false), func(tx Tx, c *change) error {
		a, t, err := leased(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		env := e.env(c)
		s, err := recordHeartbeat(a, t, req.GetDetails(), e.now(), &env)
		if err != nil {
			return err
		}
		resp.Deadline = a.GetInfo().GetLeaseDeadline()
		return e.applyStep(tx, c, &s)
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
