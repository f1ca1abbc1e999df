package engine

import (
	"context"
	"errors"
	"time"

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
// schedules its first workflow task (startWorkflow).
func (e *Engine) StartWorkflow(ctx context.Context, req *durablev1.StartWorkflowRequest) (*durablev1.StartWorkflowResponse, error) {
	err := e.commit(func(tx Tx, c *change) error {
		_, err := tx.GetWorkflow(req.GetWorkflowId())
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		exists := err == nil
		env := e.env(c)
		s, err := startWorkflow(req, exists, e.now(), &env)
		if err != nil {
			return err
		}
		return e.applyStep(tx, c, &s)
	})
	if err != nil {
		return nil, err
	}
	return &durablev1.StartWorkflowResponse{WorkflowId: req.GetWorkflowId()}, nil
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
		var taken []QueueEntry
		ok, next, err := e.rt.take(k, now, 1, func(tx Tx, c *change, entries []QueueEntry) (int, error) {
			leased, taken = nil, entries
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
			env := e.env(c)
			s, err := leaseWorkflowTask(w, q, req.GetIdentity(), now, &env)
			if errors.Is(err, errStaleEntry) {
				return 0, nil
			}
			if err != nil {
				return 0, err
			}
			// The step writes the workflow: watchers see its task leave
			// the queue.
			if err := e.applyStep(tx, c, &s); err != nil {
				return 0, err
			}
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
		// The history is read outside the batcher, where reads run in
		// parallel, and cut at this task's Started: events that land
		// meanwhile belong to the next task. It is read before the wait
		// for the sync that made the task durable, if one runs (handout.go).
		if err := e.store.View(func(tx Tx) error {
			return e.taskHistory(tx, leased, req.GetStickySession(), startedID)
		}); err != nil {
			return true, time.Time{}, err
		}
		if e.awaitDurable(taken) != nil {
			return false, time.Time{}, nil // its sync failed: see handout.go
		}
		resp.TaskToken, resp.WorkflowId, resp.WorkflowType, resp.Attempt = leased.TaskToken, leased.WorkflowId, leased.WorkflowType, leased.Attempt
		resp.History, resp.HistoryStartEventId = leased.History, leased.HistoryStartEventId
		return true, time.Time{}, nil
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
	w, t, err := workflowOfToken(tx, token)
	if err != nil {
		return nil, err
	}
	if err := liveWorkflowLease(w, t); err != nil {
		return nil, err
	}
	return w, nil
}

// workflowOfToken loads the workflow a workflow task token names; the rule
// it goes to checks the lease (liveWorkflowLease).
func workflowOfToken(tx Tx, token []byte) (*durablev1.WorkflowRecord, *durablev1.TaskToken, error) {
	t, err := DecodeToken(token)
	if err != nil {
		return nil, nil, err
	}
	if t.GetActivityId() != "" {
		return nil, nil, invalid("task_token", "is an activity task token, not a workflow task token")
	}
	w, err := tx.GetWorkflow(t.GetWorkflowId())
	if err != nil {
		return nil, nil, err
	}
	return w, t, nil
}

// CompleteWorkflowTask records the task and applies its commands in order
// (completeWorkflowTask).
func (e *Engine) CompleteWorkflowTask(ctx context.Context, req *durablev1.CompleteWorkflowTaskRequest) (*durablev1.Empty, error) {
	var closed string // the workflow, when its commands closed it
	err := e.commit(func(tx Tx, c *change) error {
		w, t, err := workflowOfToken(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		if err := liveWorkflowLease(w, t); err != nil {
			return err
		}
		facts, err := readCommandFacts(tx, w.GetInfo().GetWorkflowId(), req.GetCommands())
		if err != nil {
			return err
		}
		env := e.env(c)
		s, err := completeWorkflowTask(w, t, req, facts, e.now(), &env)
		if err != nil {
			return err
		}
		if err := e.applyStep(tx, c, &s); err != nil {
			return err
		}
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

// readCommandFacts reads what completeWorkflowTask needs to know of the
// store for each command, in order: whether a scheduled activity's id was
// used before (which marks it used), whether a started timer is running.
func readCommandFacts(tx Tx, workflowID string, cmds []*durablev1.Command) ([]commandFacts, error) {
	facts := make([]commandFacts, len(cmds))
	for i, cmd := range cmds {
		switch cmd.GetType() {
		case durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY:
			used, err := tx.UseActivityID(workflowID, cmd.GetActivityId())
			if err != nil {
				return nil, err
			}
			facts[i].activityIDUsed = used
		case durablev1.CommandType_COMMAND_TYPE_START_TIMER:
			_, err := tx.GetTimer(workflowID, cmd.GetTimerId())
			facts[i].timerRunning = err == nil
		}
	}
	return facts, nil
}

// FailWorkflowTask records a failed workflow task: retried after a backoff,
// or for a non-retryable failure the end of the workflow
// (failWorkflowTask).
func (e *Engine) FailWorkflowTask(ctx context.Context, req *durablev1.FailWorkflowTaskRequest) (*durablev1.Empty, error) {
	var failed string
	err := e.commit(func(tx Tx, c *change) error {
		w, t, err := workflowOfToken(tx, req.GetTaskToken())
		if err != nil {
			return err
		}
		env := e.env(c)
		s, err := failWorkflowTask(w, t, req, e.now(), &env)
		if err != nil {
			return err
		}
		if err := e.applyStep(tx, c, &s); err != nil {
			return err
		}
		if f := w.GetInfo().GetFailure(); w.GetInfo().GetStatus() != statusRunning {
			e.opts.Logger.Warn("workflow failed by a non-retryable workflow task failure", "workflow_id", w.GetInfo().GetWorkflowId(),
				"failure_type", f.GetType(), "message", f.GetMessage())
		}
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
