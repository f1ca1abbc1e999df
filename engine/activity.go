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
	if cur, ok := QueueEntryOf(a); !ok || cur.Seq != q.Seq {
		return nil, errStaleEntry
	}
	in := a.GetInfo()
	waited := now.Sub(in.GetNextAttemptTime().AsTime())
	a.LeaseId = newLeaseID()
	in.State = stateStarted
	in.LastStartedTime = ts(now)
	in.LastWorkerIdentity = identity
	in.NextAttemptTime = nil
	view := e.decisionView(in)
	deadline, _ := LeaseDeadline(view)
	in.LeaseDeadline = ts(deadline)
	e.addAttempt(in, &durablev1.AttemptRecord{Attempt: in.GetAttempt(), Identity: identity, StartedTime: ts(now)})
	if err := tx.PutActivity(a); err != nil {
		return nil, err
	}
	c.addTimer(Timer{Due: deadline, Kind: ActivityLeaseTimer, WorkflowID: in.GetWorkflowId(), ID: in.GetActivityId()})
	c.upsert(in)
	c.observe(observation{kind: obsStarted, activityType: in.GetActivityType(), attempt: in.GetAttempt(), d: max(waited, 0)})
	return &durablev1.ActivityTask{
		TaskToken:        encodeToken(&durablev1.TaskToken{WorkflowId: in.GetWorkflowId(), ActivityId: in.GetActivityId(), Attempt: in.GetAttempt(), LeaseId: a.GetLeaseId()}),
		WorkflowId:       in.GetWorkflowId(),
		WorkflowType:     a.GetWorkflowType(),
		ActivityId:       in.GetActivityId(),
		ActivityType:     in.GetActivityType(),
		Input:            a.GetInput(),
		Attempt:          in.GetAttempt(),
		MaxAttempts:      view.GetMaxAttempts(),
		HeartbeatDetails: in.GetHeartbeatDetails(),
		ScheduledTime:    in.GetScheduledTime(),
		StartedTime:      in.GetLastStartedTime(),
		Deadline:         in.GetLeaseDeadline(),
		HeartbeatTimeout: optionsInForce(view).GetHeartbeatTimeout(),
		IdempotencyKey:   in.GetIdempotencyKey(),
		TaskQueue:        in.GetTaskQueue(),
	}, nil
}

func (e *Engine) addAttempt(in *durablev1.PendingActivity, r *durablev1.AttemptRecord) {
	in.Attempts = append(in.Attempts, r)
	if over := len(in.Attempts) - e.opts.MaxAttemptRecords; over > 0 {
		in.Attempts = append(in.Attempts[:0:0], in.Attempts[over:]...)
		in.AttemptsTruncated += int32(over)
	}
}

// leased loads the activity a token names and checks that its lease is the
// live one.
func leased(tx Tx, token []byte) (*durablev1.ActivityRecord, error) {
	t, err := DecodeToken(token)
	if err != nil {
		return nil, err
	}
	if t.GetActivityId() == "" {
		return nil, invalid("task_token", "is a workflow task token, not an activity task token")
	}
	a, err := tx.GetActivity(t.GetWorkflowId(), t.GetActivityId())
	if errors.Is(err, ErrNotFound) {
		// The activity finished, or its workflow closed, or it never was.
		if _, werr := tx.GetWorkflow(t.GetWorkflowId()); werr == nil {
			return nil, ErrStaleTask
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if a.GetInfo().GetState() != stateStarted || a.GetLeaseId() != t.GetLeaseId() || a.GetInfo().GetAttempt() != t.GetAttempt() {
		return nil, ErrStaleTask
	}
	return a, nil
}

// CompleteActivityTask records the result of a leased attempt and wakes the
// workflow.
func (e *Engine) CompleteActivityTask(ctx context.Context, req *durablev1.CompleteActivityTaskRequest) (*durablev1.Empty, error) {
	err := e.commit(func(tx Tx, c *change) error {
		a, err := leased(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		now := e.now()
		w, err := tx.GetWorkflow(a.GetInfo().GetWorkflowId())
		if err != nil {
			return err
		}
		in := a.GetInfo()
		e.endAttempt(tx, c, in, now, nil, AttemptCompleted)
		e.appendEvents(tx, w, now,
			startedEvent(a),
			&durablev1.HistoryEvent{Type: evActivityCompleted, ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType(), Result: req.GetResult(), Identity: req.GetIdentity(), ScheduledEventId: a.GetScheduledEventId()},
		)
		return e.finishActivity(tx, c, w, a, FinishedCompleted, now)
	})
	return &durablev1.Empty{}, err
}

// FailActivityTask reports a failed attempt; Decide says what follows.
func (e *Engine) FailActivityTask(ctx context.Context, req *durablev1.FailActivityRequest) (*durablev1.Empty, error) {
	err := e.commit(func(tx Tx, c *change) error {
		a, err := leased(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		f := req.GetFailure()
		if f == nil {
			f = systemFailure(activity.TypeUnknown, "the worker reported no failure")
		}
		return e.failAttempt(tx, c, a, f, e.now(), false)
	})
	return &durablev1.Empty{}, err
}

// failAttempt is the one retry path: reported failures and expired leases
// (timedOut) both come through here. The retry rule sees the activity under
// the policy in force.
func (e *Engine) failAttempt(tx Tx, c *change, a *durablev1.ActivityRecord, f *durablev1.Failure, now time.Time, timedOut bool) error {
	in := a.GetInfo()
	w, err := tx.GetWorkflow(in.GetWorkflowId())
	if err != nil {
		return err
	}
	setLastFailure(in, f)
	d := Decide(e.decisionView(in), f, now, e.jitter)
	result := resultOf(d.Outcome)
	if timedOut {
		result = AttemptTimedOut
	}
	e.endAttempt(tx, c, in, now, f, result)
	switch d.Outcome {
	case OutcomeFail:
		e.appendEvents(tx, w, now,
			startedEvent(a),
			&durablev1.HistoryEvent{Type: evActivityFailed, ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType(), Failure: f, Attempt: in.GetAttempt(), ScheduledEventId: a.GetScheduledEventId()},
		)
		return e.finishActivity(tx, c, w, a, FinishedFailed, now)
	case OutcomeDeadLetter:
		return e.deadLetter(tx, c, w, a, d.Failure, now)
	}
	in.State = stateRetrying
	in.Attempt++
	in.NextAttemptTime = ts(d.Next)
	in.LeaseDeadline = nil
	a.Seq = e.nextID(c)
	if err := tx.PutActivity(a); err != nil {
		return err
	}
	e.noteQueued(c, a, false)
	c.upsert(in)
	return nil
}

func (e *Engine) deadLetter(tx Tx, c *change, w *durablev1.WorkflowRecord, a *durablev1.ActivityRecord, f *durablev1.Failure, now time.Time) error {
	in := a.GetInfo()
	in.State = stateDead
	setLastFailure(in, f)
	in.DeadLetteredTime = ts(now)
	in.NextAttemptTime = nil
	in.LeaseDeadline = nil
	w.Info.DeadLetters++
	if id := in.GetRedrivenByOperation(); id != "" {
		if err := e.countReDeadLetter(tx, c, id); err != nil {
			return err
		}
	}
	c.dropTimers(in.GetWorkflowId(), in.GetActivityId())
	e.appendEvents(tx, w, now, &durablev1.HistoryEvent{
		Type: evActivityDeadLettered, ActivityId: in.GetActivityId(), ActivityType: in.GetActivityType(),
		Attempt: in.GetAttempt(), Failure: f, ScheduledEventId: a.GetScheduledEventId(),
	})
	if err := tx.PutActivity(a); err != nil {
		return err
	}
	if err := tx.PutWorkflow(w); err != nil {
		return err
	}
	c.upsert(in)
	c.workflow(w)
	c.observe(observation{kind: obsDeadLettered, activityType: in.GetActivityType()})
	e.opts.Logger.Warn("activity dead-lettered", "workflow_id", in.GetWorkflowId(), "activity_id", in.GetActivityId(),
		"activity_type", in.GetActivityType(), "attempts", in.GetAttempt(), "failure_type", f.GetType())
	return nil
}

// endAttempt closes the open attempt record, feeds the latency histogram and
// tells the Observer how the attempt ended.
func (e *Engine) endAttempt(tx Tx, c *change, in *durablev1.PendingActivity, now time.Time, f *durablev1.Failure, result AttemptResult) {
	n := len(in.Attempts)
	if n == 0 || in.Attempts[n-1].GetEndedTime() != nil || in.GetState() != stateStarted {
		return
	}
	r := in.Attempts[n-1]
	r.EndedTime = ts(now)
	r.Failure = f
	took := now.Sub(r.GetStartedTime().AsTime())
	c.latency = append(c.latency, latencySample{activityType: in.GetActivityType(), at: now, d: took, failed: f != nil})
	c.observe(observation{kind: obsEnded, activityType: in.GetActivityType(), result: result, d: took})
}

// resultOf is how metrics name the end of an attempt the retry rule decided.
func resultOf(o Outcome) AttemptResult {
	switch o {
	case OutcomeFail:
		return AttemptFailed
	case OutcomeDeadLetter:
		return AttemptDeadLettered
	}
	return AttemptRetried
}

// finishActivity removes a completed or failed activity, keeps it with its
// attempt trail as finished with outcome, and wakes its workflow.
func (e *Engine) finishActivity(tx Tx, c *change, w *durablev1.WorkflowRecord, a *durablev1.ActivityRecord, outcome string, now time.Time) error {
	in := a.GetInfo()
	if err := keepFinished(tx, a, outcome, now); err != nil {
		return err
	}
	if err := tx.DeleteActivity(in.GetWorkflowId(), in.GetActivityId()); err != nil {
		return err
	}
	w.Info.PendingActivities--
	c.remove(in.GetWorkflowId(), in.GetActivityId())
	e.scheduleWorkflowTask(tx, c, w, now)
	if err := tx.PutWorkflow(w); err != nil {
		return err
	}
	c.workflow(w)
	return nil
}

// RecordHeartbeat moves the lease deadline to now + heartbeat_timeout (never
// past start-to-close or the schedule-to-close expiry, all as the policy in
// force says) and stores the details as the checkpoint the next attempt
// receives.
func (e *Engine) RecordHeartbeat(ctx context.Context, req *durablev1.HeartbeatRequest) (*durablev1.HeartbeatResponse, error) {
	resp := &durablev1.HeartbeatResponse{}
	err := e.commit(func(tx Tx, c *change) error {
		a, err := leased(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		now := e.now()
		in := a.GetInfo()
		in.LastHeartbeatTime = ts(now)
		in.HeartbeatDetails = req.GetDetails()
		before := in.GetLeaseDeadline().AsTime()
		deadline, _ := LeaseDeadline(e.decisionView(in))
		in.LeaseDeadline = ts(deadline)
		if err := tx.PutActivity(a); err != nil {
			return err
		}
		if !deadline.Equal(before) {
			// Without a heartbeat timeout the deadline stays; a timer per
			// heartbeat would only pile up until it.
			c.addTimer(Timer{Due: deadline, Kind: ActivityLeaseTimer, WorkflowID: in.GetWorkflowId(), ID: in.GetActivityId()})
		}
		c.upsert(in)
		resp.Deadline = in.GetLeaseDeadline()
		return nil
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
