package engine

import (
	"context"
	"errors"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
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
		ok, next, err := e.rt.take(k, now, max, func(tx Tx, c *change, entries []QueueEntry) (int, error) {
			tasks = tasks[:0]
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
	if err := liveLease(a, t); err != nil {
		return nil, nil, nil, err // before the workflow is read, as it need not be
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
	err := e.commit(func(tx Tx, c *change) error {
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
	err := e.commit(func(tx Tx, c *change) error {
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
	err := e.commit(func(tx Tx, c *change) error {
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

// noteQueued tells the in-memory index about an activity that has just been
// queued: its queue entry and its timers under the policy in force (the
// schedule-to-close one only when it is new, on scheduling and redrive).
func (e *Engine) noteQueued(c *change, a *durablev1.ActivityRecord, newBudget bool) {
	if q, ok := QueueEntryOf(a); ok {
		c.enqueue(q)
	}
	for _, t := range e.timersOf(a) {
		if t.Kind != ScheduleToCloseTimer || newBudget {
			c.addTimer(t)
		}
	}
}

// newActivity builds the record of a freshly scheduled activity, filling the
// options' defaults so describe shows what is in force.
func (e *Engine) newActivity(c *change, w *durablev1.WorkflowRecord, cmd *durablev1.Command, scheduledEventID int64, now time.Time) *durablev1.ActivityRecord {
	opts := proto.Clone(cmd.GetActivityOptions()).(*durablev1.ActivityOptions)
	if opts == nil {
		opts = &durablev1.ActivityOptions{}
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = w.GetInfo().GetTaskQueue()
	}
	e.fillTimeoutDefaults(opts)
	in := &durablev1.PendingActivity{
		WorkflowId:      w.GetInfo().GetWorkflowId(),
		ActivityId:      cmd.GetActivityId(),
		ActivityType:    cmd.GetActivityType(),
		TaskQueue:       opts.GetTaskQueue(),
		State:           stateScheduled,
		Attempt:         1,
		MaxAttempts:     e.maxAttemptsOf(opts),
		ScheduledTime:   ts(now),
		NextAttemptTime: ts(now),
		Options:         opts,
		IdempotencyKey:  w.GetInfo().GetWorkflowId() + "/" + cmd.GetActivityId(),
	}
	if s := opts.GetScheduleToCloseTimeout().AsDuration(); s > 0 {
		in.ExpirationTime = ts(now.Add(s))
	}
	return &durablev1.ActivityRecord{
		Info: in, Input: cmd.GetInput(), ScheduledEventId: scheduledEventID,
		WorkflowType: w.GetInfo().GetWorkflowType(), Seq: e.nextID(c),
	}
}

// fillTimeoutDefaults gives options without a start-to-close timeout the
// schedule-to-close budget as one, or else the daemon's default, so that
// every attempt has a lease that ends.
func (e *Engine) fillTimeoutDefaults(opts *durablev1.ActivityOptions) {
	fillStartToClose(opts, e.opts.DefaultStartToClose)
}

// maxAttemptsOf is the attempt whose failure dead-letters an activity with
// these options: the policy's, or the daemon's --dlq-after-attempts.
func (e *Engine) maxAttemptsOf(opts *durablev1.ActivityOptions) int32 {
	if n := opts.GetRetryPolicy().GetMaxAttempts(); n > 0 {
		return n
	}
	return int32(e.opts.DLQAfterAttempts)
}
