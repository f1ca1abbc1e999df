package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestScheduleToStartDeadLetters: an attempt nobody polls within its
// schedule-to-start timeout is dead-lettered with that reason.
func TestScheduleToStartDeadLetters(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.startWithActivity("wf", &durablev1.ActivityOptions{ScheduleToStartTimeout: dur(30 * time.Second)})
	h.clock.Advance(30*time.Second - time.Millisecond)
	if s := h.describe("wf").GetPendingActivities()[0].GetState(); s != durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED {
		t.Fatalf("state before the timeout = %v", s)
	}
	h.clock.Advance(time.Millisecond)
	d := h.describe("wf").GetPendingActivities()[0]
	if d.GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED || d.GetLastFailure().GetType() != engine.TimeoutScheduleToStart {
		t.Fatalf("after the timeout: %v %v", d.GetState(), d.GetLastFailure())
	}
	if task := h.pollActivity(); task != nil {
		t.Fatal("a dead letter was delivered")
	}
}

// TestScheduleToCloseBudget: retries stop when the next one would start after
// the schedule-to-close budget, and a running attempt is cut off when the
// budget ends, both dead-lettering with ScheduleToCloseTimeout.
func TestScheduleToCloseBudget(t *testing.T) {
	t.Parallel()
	t.Run("RetryWouldOverrun", func(t *testing.T) {
		t.Parallel()
		h := setup(t, engine.Options{})
		h.startWithActivity("wf", &durablev1.ActivityOptions{
			ScheduleToCloseTimeout: dur(10 * time.Second), StartToCloseTimeout: dur(5 * time.Second),
			RetryPolicy: &durablev1.RetryPolicy{InitialMs: 4000, MaxAttempts: 10},
		})
		h.fail(h.pollActivity(), &durablev1.Failure{Type: "Flaky"}) // retry at 4 s
		h.clock.Advance(4 * time.Second)
		h.fail(h.pollActivity(), &durablev1.Failure{Type: "Flaky"}) // retry would be at 12 s > 10 s
		d := h.describe("wf").GetPendingActivities()[0]
		if d.GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED || d.GetLastFailure().GetType() != engine.TimeoutScheduleToClose {
			t.Fatalf("got %v %v, want a ScheduleToCloseTimeout dead letter", d.GetState(), d.GetLastFailure())
		}
	})
	t.Run("RunningAttemptCutOff", func(t *testing.T) {
		t.Parallel()
		h := setup(t, engine.Options{})
		h.startWithActivity("wf", &durablev1.ActivityOptions{ScheduleToCloseTimeout: dur(10 * time.Second), StartToCloseTimeout: dur(time.Minute)})
		task := h.pollActivity()
		if !task.GetDeadline().AsTime().Equal(t0.Add(10 * time.Second)) {
			t.Errorf("lease deadline %v, want the budget's end", task.GetDeadline().AsTime())
		}
		h.clock.Advance(10 * time.Second)
		d := h.describe("wf").GetPendingActivities()[0]
		if d.GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED || d.GetLastFailure().GetType() != engine.TimeoutScheduleToClose {
			t.Fatalf("got %v %v", d.GetState(), d.GetLastFailure())
		}
		if _, err := h.e.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()}); err == nil {
			t.Error("the cut-off attempt could still complete")
		}
	})
}

// TestWorkflowTimerFires: a StartTimer command fires TimerFired at exactly its
// due time and wakes the workflow.
func TestWorkflowTimerFires(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	ctx := context.Background()
	h.start("wf", "Sleepy")
	wt := h.pollWorkflow()
	if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_START_TIMER, TimerId: "t1", TimerDuration: dur(time.Hour),
	}}}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Hour - time.Millisecond)
	if h.pollWorkflow() != nil {
		t.Fatal("workflow task before the timer fired")
	}
	h.clock.Advance(time.Millisecond)
	wt = h.pollWorkflow()
	if wt == nil {
		t.Fatal("no workflow task after the timer fired")
	}
	if n := count(wt.GetHistory(), durablev1.EventType_EVENT_TYPE_TIMER_FIRED); n != 1 {
		t.Fatalf("%d TimerFired events", n)
	}
	if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW, Result: []byte(`"done"`),
	}}}); err != nil {
		t.Fatal(err)
	}
	w := h.describe("wf").GetWorkflow()
	if w.GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED || string(w.GetResult()) != `"done"` {
		t.Fatalf("workflow = %v", w)
	}
}

// TestWorkflowTaskLeaseExpires: a workflow task whose worker vanished is
// handed out again after its lease, and the old token is refused.
func TestWorkflowTaskLeaseExpires(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{WorkflowTaskTimeout: 10 * time.Second})
	h.start("wf", "X")
	old := h.pollWorkflow()
	h.clock.Advance(10 * time.Second)
	h.clock.Advance(time.Second) // the default backoff of a failed workflow task
	again := h.pollWorkflow()
	if again == nil || again.GetAttempt() != 2 {
		t.Fatalf("poll after the lease = %v, want attempt 2", again)
	}
	if _, err := h.e.CompleteWorkflowTask(context.Background(), &durablev1.CompleteWorkflowTaskRequest{TaskToken: old.GetTaskToken()}); err == nil {
		t.Fatal("the expired workflow task could still complete")
	}
}

// TestCompletionWhileWorkflowTaskRunsSchedulesAnother: an activity that
// completes while the workflow's task is running gets a workflow task of its
// own once that one completes.
func TestCompletionWhileWorkflowTaskRunsSchedulesAnother(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	ctx := context.Background()
	h.start("wf", "X")
	wt := h.pollWorkflow()
	var cmds []*durablev1.Command
	for _, id := range []string{"1", "2"} {
		cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: id, ActivityType: "Charge"})
	}
	if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
		t.Fatal(err)
	}
	r, err := h.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", MaxTasks: 5})
	if err != nil || len(r.GetTasks()) != 2 {
		t.Fatalf("batch poll = %v, %v; want both activities", r.GetTasks(), err)
	}
	complete := func(task *durablev1.ActivityTask) {
		t.Helper()
		if _, err := h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken(), Result: []byte("1")}); err != nil {
			t.Fatal(err)
		}
	}
	complete(r.GetTasks()[0])
	running := h.pollWorkflow()
	complete(r.GetTasks()[1]) // while the task runs
	if h.pollWorkflow() != nil {
		t.Fatal("two workflow tasks of one workflow at once")
	}
	if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: running.GetTaskToken()}); err != nil {
		t.Fatal(err)
	}
	next := h.pollWorkflow()
	if next == nil {
		t.Fatal("the completion during the running task was not followed by a task")
	}
	if n := count(next.GetHistory(), durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED); n != 2 {
		t.Fatalf("%d completions in history, want 2", n)
	}
}

// TestActivityIDIsNeverReused: the activity id is half of the idempotency
// key, so scheduling a finished activity's id again is refused.
func TestActivityIDIsNeverReused(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	ctx := context.Background()
	h.startWithActivity("wf", nil)
	if _, err := h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: h.pollActivity().GetTaskToken()}); err != nil {
		t.Fatal(err)
	}
	wt := h.pollWorkflow()
	_, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{
		{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge"},
	}})
	var ie *engine.InvalidError
	if !errors.As(err, &ie) || ie.Field != "commands[0].activity_id" {
		t.Fatalf("reusing a finished activity's id: %v, want InvalidError on commands[0].activity_id", err)
	}
}

// TestFailedTransitionWritesNothing: a workflow task whose second command is
// refused leaves no trace of its first: the transition is one transaction.
func TestFailedTransitionWritesNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	ctx := context.Background()
	h.startWithActivity("wf", nil)
	if _, err := h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: h.pollActivity().GetTaskToken()}); err != nil {
		t.Fatal(err)
	}
	wt := h.pollWorkflow()
	before := len(h.history("wf"))
	_, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{
		{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "2", ActivityType: "Charge"},
		{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge"},
	}})
	if err == nil {
		t.Fatal("a command reusing a finished activity's id was accepted")
	}
	if n := len(h.history("wf")); n != before {
		t.Errorf("history grew from %d to %d events on a refused task", before, n)
	}
	if pa := h.describe("wf").GetPendingActivities(); len(pa) != 0 {
		t.Errorf("the refused task left pending activities: %v", pa)
	}
	if task := h.pollActivity(); task != nil {
		t.Errorf("the refused task's first command was delivered: %v", task.GetActivityId())
	}
	// The lease was not consumed: the same task completes once corrected.
	if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{
		{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "2", ActivityType: "Charge"},
	}}); err != nil {
		t.Fatalf("the corrected task: %v", err)
	}
}
