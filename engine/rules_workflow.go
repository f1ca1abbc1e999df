package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// The rules of a workflow and its workflow tasks. Pure functions: see
// rules.go.

// scheduleWorkflowTask makes sure the workflow code runs again: it
// schedules a task due now, leaves a scheduled one alone, or marks a running
// one dirty so that another follows it. A closed workflow runs no more.
func (s *step) scheduleWorkflowTask(w *durablev1.WorkflowRecord, now time.Time, env *ruleEnv) {
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
	w.WtSeq = env.Draw.NextID()
	w.WtDirty = false
	s.record(w, now, &durablev1.HistoryEvent{Type: evWorkflowTaskScheduled, TaskQueue: w.GetInfo().GetTaskQueue()})
	q, _ := WorkflowQueueEntryOf(w)
	s.effect(effect{kind: effEnqueue, entry: q})
}

// startWorkflow creates a workflow (none may exist under its id yet):
// WorkflowExecutionStarted, and its first workflow task, due now.
func startWorkflow(req *durablev1.StartWorkflowRequest, exists bool, now time.Time, env *ruleEnv) (step, error) {
	if exists {
		return step{}, ErrAlreadyExists
	}
	w := &durablev1.WorkflowRecord{
		Info: &durablev1.WorkflowInfo{
			WorkflowId: req.GetWorkflowId(), WorkflowType: req.GetWorkflowType(), TaskQueue: req.GetTaskQueue(),
			Status: statusRunning, StartTime: ts(now),
		},
		Input:       req.GetInput(),
		NextEventId: 1,
		WtState:     wtNone,
	}
	var s step
	s.record(w, now, &durablev1.HistoryEvent{
		Type: evWorkflowStarted, WorkflowType: req.GetWorkflowType(), TaskQueue: req.GetTaskQueue(), Input: req.GetInput(),
	})
	s.scheduleWorkflowTask(w, now, env)
	return s, nil
}

// leaseWorkflowTask hands the workflow task that queue entry q names to the
// worker identity at now, for the workflow task timeout. Its
// WorkflowTaskStarted is recorded now, so that replay knows which events the
// task saw: those before it. An entry the record has moved on from is
// errStaleEntry.
func leaseWorkflowTask(w *durablev1.WorkflowRecord, q QueueEntry, identity string, now time.Time, env *ruleEnv) (step, error) {
	if cur, ok := WorkflowQueueEntryOf(w); !ok || cur.Seq != q.Seq {
		return step{}, errStaleEntry
	}
	w.WtState = wtStarted
	w.WtLeaseId = env.Draw.LeaseID()
	w.WtDeadline = ts(now.Add(env.WorkflowTaskTimeout))
	var s step
	s.record(w, now, &durablev1.HistoryEvent{Type: evWorkflowTaskStarted, Identity: identity, Attempt: w.GetWtAttempt()})
	for _, t := range WorkflowTimersOf(w) {
		s.effect(effect{kind: effSetTimer, timer: t})
	}
	return s, nil
}

// liveWorkflowLease refuses a token whose workflow task lease is not the
// live one, or whose workflow has closed.
func liveWorkflowLease(w *durablev1.WorkflowRecord, t *durablev1.TaskToken) error {
	if w.GetWtState() != wtStarted || w.GetWtLeaseId() != t.GetLeaseId() || w.GetInfo().GetStatus() != statusRunning {
		return ErrStaleTask
	}
	return nil
}

// commandFacts is what the store knows about one command of a completed
// workflow task, read before the rule runs.
type commandFacts struct {
	// activityIDUsed: a schedule command's activity id was scheduled
	// before by this workflow (or earlier in the same task).
	activityIDUsed bool
	// timerRunning: a start-timer command's timer id is running.
	timerRunning bool
}

// completeWorkflowTask records the task and applies its commands in order:
// activities scheduled (their options' defaults filled in, and recorded so
// in ActivityTaskScheduled), timers started, the workflow completed or
// failed. A command after the one that closed the workflow, an activity id
// used before, a timer id that is running and an unknown command are
// *InvalidError naming the command. A workflow task marked dirty while it
// ran is followed by another.
func completeWorkflowTask(w *durablev1.WorkflowRecord, t *durablev1.TaskToken, req *durablev1.CompleteWorkflowTaskRequest, facts []commandFacts, now time.Time, env *ruleEnv) (step, error) {
	if err := liveWorkflowLease(w, t); err != nil {
		return step{}, err
	}
	var s step
	s.record(w, now, &durablev1.HistoryEvent{Type: evWorkflowTaskCompleted, Identity: req.GetIdentity()})
	for i, cmd := range req.GetCommands() {
		if w.GetInfo().GetStatus() != statusRunning {
			return step{}, invalid(fmt.Sprintf("commands[%d]", i), "follows the command that closed the workflow")
		}
		if err := s.applyCommand(w, i, cmd, facts[i], now, env); err != nil {
			return step{}, err
		}
	}
	dirty := w.GetWtDirty()
	w.WtState, w.WtDirty, w.WtDeadline = wtNone, false, nil
	if dirty {
		s.scheduleWorkflowTask(w, now, env)
	}
	s.Workflow = w
	return s, nil
}

func (s *step) applyCommand(w *durablev1.WorkflowRecord, i int, cmd *durablev1.Command, facts commandFacts, now time.Time, env *ruleEnv) error {
	id := w.GetInfo().GetWorkflowId()
	switch cmd.GetType() {
	case durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY:
		if facts.activityIDUsed {
			// The id is the idempotency key's second half: a second
			// activity under it would have its effects taken for the first's.
			return invalid(fmt.Sprintf("commands[%d].activity_id", i), "activity %q was already scheduled by this workflow", cmd.GetActivityId())
		}
		// The event records the options in force, defaults filled in, so
		// the record is built first with the id the event is about to get.
		a := newActivity(w, cmd, w.GetNextEventId(), now, env)
		s.record(w, now, &durablev1.HistoryEvent{
			Type: evActivityScheduled, ActivityId: cmd.GetActivityId(), ActivityType: cmd.GetActivityType(),
			Input: cmd.GetInput(), ActivityOptions: a.GetInfo().GetOptions(),
		})
		s.Scheduled = append(s.Scheduled, a)
		w.Info.PendingActivities++
		s.queued(a, true, env)
	case durablev1.CommandType_COMMAND_TYPE_START_TIMER:
		running := facts.timerRunning || slices.ContainsFunc(s.Timers, func(t *durablev1.TimerRecord) bool { return t.GetTimerId() == cmd.GetTimerId() })
		if running {
			return invalid(fmt.Sprintf("commands[%d].timer_id", i), "timer %q is already running", cmd.GetTimerId())
		}
		ev := &durablev1.HistoryEvent{Type: evTimerStarted, TimerId: cmd.GetTimerId(), TimerDuration: cmd.GetTimerDuration()}
		s.record(w, now, ev)
		s.Timers = append(s.Timers, &durablev1.TimerRecord{WorkflowId: id, TimerId: cmd.GetTimerId(),
			FireTime: ts(now.Add(cmd.GetTimerDuration().AsDuration())), StartedEventId: ev.GetEventId()})
	case durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW:
		s.record(w, now, &durablev1.HistoryEvent{Type: evWorkflowCompleted, Result: cmd.GetResult()})
		w.Info.Result = cmd.GetResult()
		s.closeWorkflow(w, statusCompleted, now)
	case durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW:
		s.record(w, now, &durablev1.HistoryEvent{Type: evWorkflowFailed, Failure: cmd.GetFailure()})
		w.Info.Failure = cmd.GetFailure()
		s.closeWorkflow(w, statusFailed, now)
	default:
		return invalid(fmt.Sprintf("commands[%d].type", i), "unknown command type %v", cmd.GetType())
	}
	return nil
}

// newActivity builds the record of an activity a command schedules now,
// filling the options' defaults so describe shows what is in force.
func newActivity(w *durablev1.WorkflowRecord, cmd *durablev1.Command, scheduledEventID int64, now time.Time, env *ruleEnv) *durablev1.ActivityRecord {
	opts := proto.Clone(cmd.GetActivityOptions()).(*durablev1.ActivityOptions)
	if opts == nil {
		opts = &durablev1.ActivityOptions{}
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = w.GetInfo().GetTaskQueue()
	}
	fillStartToClose(opts, env.Defaults.StartToClose)
	in := &durablev1.PendingActivity{
		WorkflowId:      w.GetInfo().GetWorkflowId(),
		ActivityId:      cmd.GetActivityId(),
		ActivityType:    cmd.GetActivityType(),
		TaskQueue:       opts.GetTaskQueue(),
		State:           stateScheduled,
		Attempt:         1,
		MaxAttempts:     maxAttemptsOf(opts, env.Defaults),
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
		WorkflowType: w.GetInfo().GetWorkflowType(), Seq: env.Draw.NextID(),
	}
}

// closeWorkflow ends a workflow with status at now; what it left pending
// goes with it (effCloseWorkflow).
func (s *step) closeWorkflow(w *durablev1.WorkflowRecord, status durablev1.WorkflowStatus, now time.Time) {
	w.Info.Status = status
	w.Info.CloseTime = ts(now)
	w.Info.PendingActivities, w.Info.DeadLetters = 0, 0
	s.effect(effect{kind: effCloseWorkflow, at: now})
	s.Workflow = w
}

// failWorkflowTask records a failed workflow task. A retryable failure (a
// panic, non-determinism) schedules the task again after a backoff, so a
// fixed worker picks it up; a non-retryable one (commands the daemon
// refused, which the same code would send again) fails the workflow with
// it, rather than retrying the same task forever.
func failWorkflowTask(w *durablev1.WorkflowRecord, t *durablev1.TaskToken, req *durablev1.FailWorkflowTaskRequest, now time.Time, env *ruleEnv) (step, error) {
	if err := liveWorkflowLease(w, t); err != nil {
		return step{}, err
	}
	f := req.GetFailure()
	var s step
	s.record(w, now, &durablev1.HistoryEvent{Type: evWorkflowTaskFailed, Failure: f, Identity: req.GetIdentity(), Attempt: w.GetWtAttempt()})
	if f.GetNonRetryable() {
		s.record(w, now, &durablev1.HistoryEvent{Type: evWorkflowFailed, Failure: f})
		w.Info.Failure = f
		w.WtState, w.WtDirty, w.WtDeadline = wtNone, false, nil
		s.closeWorkflow(w, statusFailed, now)
	} else {
		s.retryWorkflowTask(w, now, env)
	}
	return s, nil
}

// retryWorkflowTask schedules the next attempt of a failed or timed-out
// workflow task after the default backoff (no jitter: one workflow's
// task has no herd to spread).
func (s *step) retryWorkflowTask(w *durablev1.WorkflowRecord, now time.Time, env *ruleEnv) {
	due := now.Add(activity.Backoff(nil, int(w.GetWtAttempt())))
	w.WtState = wtScheduled
	w.WtAttempt++
	w.WtDue = ts(due)
	w.WtDeadline = nil
	w.WtDirty = false
	w.WtSeq = env.Draw.NextID()
	q, _ := WorkflowQueueEntryOf(w)
	s.effect(effect{kind: effEnqueue, entry: q})
	s.Workflow = w
}
