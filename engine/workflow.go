package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const (
	evWorkflowStarted       = durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
	evWorkflowCompleted     = durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
	evWorkflowFailed        = durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
	evWorkflowTaskScheduled = durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
	evWorkflowTaskStarted   = durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED
	evWorkflowTaskCompleted = durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED
	evWorkflowTaskFailed    = durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED
	evActivityScheduled     = durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
	evActivityStarted       = durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_STARTED
	evActivityCompleted     = durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED
	evActivityFailed        = durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED
	evActivityDeadLettered  = durablev1.EventType_EVENT_TYPE_ACTIVITY_DEAD_LETTERED
	evActivityRedriven      = durablev1.EventType_EVENT_TYPE_ACTIVITY_REDRIVEN
	evTimerStarted          = durablev1.EventType_EVENT_TYPE_TIMER_STARTED
	evTimerFired            = durablev1.EventType_EVENT_TYPE_TIMER_FIRED

	wtNone      = durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE
	wtScheduled = durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED
	wtStarted   = durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_STARTED

	statusRunning   = durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
	statusCompleted = durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED
	statusFailed    = durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED
)

// StartWorkflow creates a workflow, records WorkflowExecutionStarted and
// schedules its first workflow task.
func (e *Engine) StartWorkflow(ctx context.Context, req *durablev1.StartWorkflowRequest) (*durablev1.StartWorkflowResponse, error) {
	err := e.commit(func(tx Tx, c *change) error {
		if _, err := tx.GetWorkflow(req.GetWorkflowId()); err == nil {
			return ErrAlreadyExists
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		now := e.now()
		w := &durablev1.WorkflowRecord{
			Info: &durablev1.WorkflowInfo{
				WorkflowId: req.GetWorkflowId(), WorkflowType: req.GetWorkflowType(), TaskQueue: req.GetTaskQueue(),
				Status: statusRunning, StartTime: ts(now),
			},
			Input:       req.GetInput(),
			NextEventId: 1,
			WtState:     wtNone,
		}
		e.appendEvents(tx, w, now, &durablev1.HistoryEvent{
			Type: evWorkflowStarted, WorkflowType: req.GetWorkflowType(), TaskQueue: req.GetTaskQueue(), Input: req.GetInput(),
		})
		e.scheduleWorkflowTask(tx, c, w, now)
		if err := tx.PutWorkflow(w); err != nil {
			return err
		}
		c.workflow(w)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &durablev1.StartWorkflowResponse{WorkflowId: req.GetWorkflowId()}, nil
}

// appendEvents numbers events, stamps those without a time with now and
// stores them. The caller writes w.
func (e *Engine) appendEvents(tx Tx, w *durablev1.WorkflowRecord, now time.Time, events ...*durablev1.HistoryEvent) {
	for _, ev := range events {
		ev.EventId = w.NextEventId
		if ev.Time == nil {
			ev.Time = ts(now)
		}
		w.NextEventId++
	}
	w.Info.HistoryLength = w.NextEventId - 1
	if err := tx.AppendEvents(w.GetInfo().GetWorkflowId(), events); err != nil {
		// AppendEvents only fails with the transaction itself, which the
		// caller's next Put reports; keep the record consistent meanwhile.
		e.opts.Logger.Error("append history", "workflow_id", w.GetInfo().GetWorkflowId(), "err", err)
	}
}

// scheduleWorkflowTask makes sure the workflow code runs again: it schedules a
// task, leaves a scheduled one alone, or marks a running one dirty so another
// follows it. The caller writes w.
func (e *Engine) scheduleWorkflowTask(tx Tx, c *change, w *durablev1.WorkflowRecord, now time.Time) {
	if w.GetInfo().GetStatus() != statusRunning {
		return
	}
	switch w.GetWtState() {
	case wtScheduled:
		return
	case wtStarted:
		w.WtDirty = true
		return
	}
	w.WtState = wtScheduled
	w.WtAttempt = 1
	w.WtDue = ts(now)
	w.WtSeq = e.nextID(c)
	w.WtDirty = false
	e.appendEvents(tx, w, now, &durablev1.HistoryEvent{Type: evWorkflowTaskScheduled, TaskQueue: w.GetInfo().GetTaskQueue()})
	q, _ := WorkflowQueueEntryOf(w)
	c.enqueue(q)
}

// PollWorkflowTask leases the next workflow task of a queue and returns the
// workflow's history up to the task's WorkflowTaskStarted: the whole of it,
// or for a poll with a sticky session that ran and completed the previous
// task, only the events after that task's Started (sticky.go).
func (e *Engine) PollWorkflowTask(ctx context.Context, req *durablev1.PollWorkflowTaskRequest) (*durablev1.PollWorkflowTaskResponse, error) {
	resp := &durablev1.PollWorkflowTaskResponse{}
	k := queueKey{WorkflowTask, req.GetTaskQueue()}
	err := e.longPoll(ctx, k, req.GetIdentity(), func(now time.Time) (bool, time.Time, error) {
		if e.gate.err() != nil {
			return false, time.Time{}, nil // a lease is a write: see PollActivityTask
		}
		// What the lease transaction handed out is the poll's answer only
		// when take reports a lease: the store may run the transaction
		// again after a conflict, and the run that commits may find the
		// task gone to another node and not call this at all, so an
		// earlier run's lease, rolled back, must not reach the answer.
		var startedID int64
		var leased *durablev1.PollWorkflowTaskResponse
		ok, next, err := e.rt.take(k, now, 1, func(tx Tx, c *change, entries []QueueEntry) (int, error) {
			leased = nil
			// The lease counts from this run of its transaction, which may
			// come seconds after the poll looked (batches ahead of it,
			// conflicts run again), not from then.
			now := e.now()
			q := entries[0]
			w, err := tx.GetWorkflow(q.WorkflowID)
			if errors.Is(err, ErrNotFound) {
				return 0, nil
			}
			if err != nil {
				return 0, err
			}
			if cur, ok := WorkflowQueueEntryOf(w); !ok || cur.Seq != q.Seq {
				return 0, nil // stale entry
			}
			w.WtState = wtStarted
			w.WtLeaseId = newLeaseID()
			w.WtDeadline = ts(now.Add(e.opts.WorkflowTaskTimeout))
			// Started is recorded when the task is handed out, so replay
			// knows which events the task saw: those before it.
			e.appendEvents(tx, w, now, &durablev1.HistoryEvent{Type: evWorkflowTaskStarted, Identity: req.GetIdentity(), Attempt: w.GetWtAttempt()})
			if err := tx.PutWorkflow(w); err != nil {
				return 0, err
			}
			c.addTimer(WorkflowTimersOf(w)...)
			c.workflow(w) // watchers see its task leave the queue
			startedID = w.GetNextEventId() - 1
			leased = &durablev1.PollWorkflowTaskResponse{
				TaskToken:    encodeToken(&durablev1.TaskToken{WorkflowId: w.GetInfo().GetWorkflowId(), Attempt: w.GetWtAttempt(), LeaseId: w.GetWtLeaseId()}),
				WorkflowId:   w.GetInfo().GetWorkflowId(),
				WorkflowType: w.GetInfo().GetWorkflowType(),
				Attempt:      w.GetWtAttempt(),
			}
			return 1, nil
		})
		if err != nil {
			if refused(err) {
				return false, time.Time{}, nil
			}
			return false, time.Time{}, err
		}
		if !ok {
			return false, next, nil
		}
		resp.TaskToken, resp.WorkflowId, resp.WorkflowType, resp.Attempt = leased.TaskToken, leased.WorkflowId, leased.WorkflowType, leased.Attempt
		// The history is read outside the batcher, where reads run in
		// parallel, and cut at this task's Started: events that land
		// meanwhile belong to the next task.
		return true, time.Time{}, e.store.View(func(tx Tx) error {
			return e.taskHistory(tx, resp, req.GetStickySession(), startedID)
		})
	})
	return resp, err
}

// taskHistory fills in the history of a workflow task just leased, whose
// WorkflowTaskStarted is started: only the events after the previous task's
// Started when session ran that task and it completed, else all of them.
func (e *Engine) taskHistory(tx Tx, resp *durablev1.PollWorkflowTaskResponse, session string, started int64) error {
	id := resp.GetWorkflowId()
	prev, known := e.sticky.swap(id, stickyMark{session: session, started: started})
	from := max(partialFrom(prev, known, session, started), 1)
	h, err := tx.HistoryRange(id, from, started)
	if err != nil {
		return err
	}
	if from > 1 && !continuesTask(h, from, started) {
		head, err := tx.HistoryRange(id, 1, from-1)
		if err != nil {
			return err
		}
		h, from = append(head, h...), 1
	}
	resp.History = h
	if from > 1 {
		resp.HistoryStartEventId = from
	}
	return nil
}

// GetWorkflowTaskHistory returns the events before req.before_event_id (all
// of them, for 0) of the workflow whose task the token leases: what
// a worker sent a partial history needs when the workflow is no longer in
// its cache.
func (e *Engine) GetWorkflowTaskHistory(ctx context.Context, req *durablev1.GetWorkflowTaskHistoryRequest) (*durablev1.GetWorkflowHistoryResponse, error) {
	resp := &durablev1.GetWorkflowHistoryResponse{}
	err := e.view(func(tx Tx) error {
		w, err := leasedWorkflow(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		through := w.GetNextEventId() - 1
		if b := req.GetBeforeEventId(); b > 0 {
			through = min(through, b-1)
		}
		resp.Events, err = tx.HistoryRange(w.GetInfo().GetWorkflowId(), 1, through)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// leasedWorkflow loads the workflow a token names and checks that its task
// lease is the live one.
func leasedWorkflow(tx Tx, token []byte) (*durablev1.WorkflowRecord, error) {
	t, err := DecodeToken(token)
	if err != nil {
		return nil, err
	}
	if t.GetActivityId() != "" {
		return nil, invalid("task_token", "is an activity task token, not a workflow task token")
	}
	w, err := tx.GetWorkflow(t.GetWorkflowId())
	if err != nil {
		return nil, err
	}
	if w.GetWtState() != wtStarted || w.GetWtLeaseId() != t.GetLeaseId() || w.GetInfo().GetStatus() != statusRunning {
		return nil, ErrStaleTask
	}
	return w, nil
}

// CompleteWorkflowTask records the task and applies its commands in order.
func (e *Engine) CompleteWorkflowTask(ctx context.Context, req *durablev1.CompleteWorkflowTaskRequest) (*durablev1.Empty, error) {
	var closed string // the workflow, when its commands closed it
	err := e.commit(func(tx Tx, c *change) error {
		w, err := leasedWorkflow(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		now := e.now()
		e.appendEvents(tx, w, now, &durablev1.HistoryEvent{Type: evWorkflowTaskCompleted, Identity: req.GetIdentity()})
		for i, cmd := range req.GetCommands() {
			if w.GetInfo().GetStatus() != statusRunning {
				return invalid(fmt.Sprintf("commands[%d]", i), "follows the command that closed the workflow")
			}
			if err := e.applyCommand(tx, c, w, i, cmd, now); err != nil {
				return err
			}
		}
		dirty := w.GetWtDirty()
		w.WtState, w.WtDirty, w.WtDeadline = wtNone, false, nil
		if dirty {
			e.scheduleWorkflowTask(tx, c, w, now)
		}
		if err := tx.PutWorkflow(w); err != nil {
			return err
		}
		c.workflow(w)
		if w.GetInfo().GetStatus() != statusRunning {
			closed = w.GetInfo().GetWorkflowId()
		}
		return nil
	})
	if err == nil && closed != "" {
		e.sticky.forget(closed)
	}
	return &durablev1.Empty{}, err
}

func (e *Engine) applyCommand(tx Tx, c *change, w *durablev1.WorkflowRecord, i int, cmd *durablev1.Command, now time.Time) error {
	id := w.GetInfo().GetWorkflowId()
	switch cmd.GetType() {
	case durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY:
		used, err := tx.UseActivityID(id, cmd.GetActivityId())
		if err != nil {
			return err
		}
		if used {
			// The id is the idempotency key's second half: a second
			// activity under it would have its effects taken for the first's.
			return invalid(fmt.Sprintf("commands[%d].activity_id", i), "activity %q was already scheduled by this workflow", cmd.GetActivityId())
		}
		// The event records the options in force, defaults filled in, so
		// the record is built first with the id the event is about to get.
		a := e.newActivity(c, w, cmd, w.GetNextEventId(), now)
		e.appendEvents(tx, w, now, &durablev1.HistoryEvent{
			Type: evActivityScheduled, ActivityId: cmd.GetActivityId(), ActivityType: cmd.GetActivityType(),
			Input: cmd.GetInput(), ActivityOptions: a.GetInfo().GetOptions(),
		})
		if err := tx.PutActivity(a); err != nil {
			return err
		}
		if err := rememberOptions(tx, a.GetInfo()); err != nil {
			return err
		}
		w.Info.PendingActivities++
		e.noteQueued(c, a, true)
		c.upsert(a.GetInfo())
	case durablev1.CommandType_COMMAND_TYPE_START_TIMER:
		if _, err := tx.GetTimer(id, cmd.GetTimerId()); err == nil {
			return invalid(fmt.Sprintf("commands[%d].timer_id", i), "timer %q is already running", cmd.GetTimerId())
		}
		ev := &durablev1.HistoryEvent{Type: evTimerStarted, TimerId: cmd.GetTimerId(), TimerDuration: cmd.GetTimerDuration()}
		e.appendEvents(tx, w, now, ev)
		t := &durablev1.TimerRecord{WorkflowId: id, TimerId: cmd.GetTimerId(), FireTime: ts(now.Add(cmd.GetTimerDuration().AsDuration())), StartedEventId: ev.GetEventId()}
		if err := tx.PutTimer(t); err != nil {
			return err
		}
		c.addTimer(UserTimerOf(t))
	case durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW:
		e.appendEvents(tx, w, now, &durablev1.HistoryEvent{Type: evWorkflowCompleted, Result: cmd.GetResult()})
		w.Info.Result = cmd.GetResult()
		return e.closeWorkflow(tx, c, w, statusCompleted, now)
	case durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW:
		e.appendEvents(tx, w, now, &durablev1.HistoryEvent{Type: evWorkflowFailed, Failure: cmd.GetFailure()})
		w.Info.Failure = cmd.GetFailure()
		return e.closeWorkflow(tx, c, w, statusFailed, now)
	default:
		return invalid(fmt.Sprintf("commands[%d].type", i), "unknown command type %v", cmd.GetType())
	}
	return nil
}

// closeWorkflow ends a workflow and drops what it left pending: activities
// (dead letters included), which are kept as finished with their attempt
// trail, and timers. The caller writes w.
func (e *Engine) closeWorkflow(tx Tx, c *change, w *durablev1.WorkflowRecord, status durablev1.WorkflowStatus, now time.Time) error {
	id := w.GetInfo().GetWorkflowId()
	w.Info.Status = status
	w.Info.CloseTime = ts(now)
	acts, err := tx.Activities(id)
	if err != nil {
		return err
	}
	for _, a := range acts {
		if err := keepFinished(tx, a, FinishedWorkflowClosed, now); err != nil {
			return err
		}
		if err := tx.DeleteActivity(id, a.GetInfo().GetActivityId()); err != nil {
			return err
		}
		c.remove(id, a.GetInfo().GetActivityId())
	}
	w.Info.PendingActivities, w.Info.DeadLetters = 0, 0
	c.closed = append(c.closed, id)
	return nil
}

// FailWorkflowTask records a failed workflow task. A retryable failure (a
// panic, non-determinism) schedules the task again after a backoff, so a
// fixed worker picks it up; a non-retryable one (commands the daemon refused,
// which the same code would send again) fails the workflow with it, rather
// than retrying the same task forever.
func (e *Engine) FailWorkflowTask(ctx context.Context, req *durablev1.FailWorkflowTaskRequest) (*durablev1.Empty, error) {
	var failed string
	err := e.commit(func(tx Tx, c *change) error {
		w, err := leasedWorkflow(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		now := e.now()
		f := req.GetFailure()
		e.appendEvents(tx, w, now, &durablev1.HistoryEvent{Type: evWorkflowTaskFailed, Failure: f, Identity: req.GetIdentity(), Attempt: w.GetWtAttempt()})
		if f.GetNonRetryable() {
			e.appendEvents(tx, w, now, &durablev1.HistoryEvent{Type: evWorkflowFailed, Failure: f})
			w.Info.Failure = f
			w.WtState, w.WtDirty, w.WtDeadline = wtNone, false, nil
			if err := e.closeWorkflow(tx, c, w, statusFailed, now); err != nil {
				return err
			}
			e.opts.Logger.Warn("workflow failed by a non-retryable workflow task failure", "workflow_id", w.GetInfo().GetWorkflowId(),
				"failure_type", f.GetType(), "message", f.GetMessage())
		} else {
			e.retryWorkflowTask(c, w, now)
		}
		if err := tx.PutWorkflow(w); err != nil {
			return err
		}
		c.workflow(w)
		failed = w.GetInfo().GetWorkflowId()
		return nil
	})
	if err == nil {
		// The history's WorkflowTaskFailed already sends the next task the
		// whole history; the mark is only memory now.
		e.sticky.forget(failed)
	}
	return &durablev1.Empty{}, err
}

// retryWorkflowTask schedules the next attempt of a failed or timed-out
// workflow task after the default backoff.
func (e *Engine) retryWorkflowTask(c *change, w *durablev1.WorkflowRecord, now time.Time) {
	due := now.Add(activity.Backoff(nil, int(w.GetWtAttempt())))
	w.WtState = wtScheduled
	w.WtAttempt++
	w.WtDue = ts(due)
	w.WtDeadline = nil
	w.WtDirty = false
	w.WtSeq = e.nextID(c)
	q, _ := WorkflowQueueEntryOf(w)
	c.enqueue(q)
}
