package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func (h *harness) complete(task *durablev1.ActivityTask) {
	h.t.Helper()
	if _, err := h.e.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken(), Result: []byte(`"ok"`), Identity: "worker-1"}); err != nil {
		h.t.Fatal(err)
	}
}

// storedFinished counts the finished activities of a workflow in the store,
// whether or not describe would still show them.
func (h *harness) storedFinished(wf string) int {
	h.t.Helper()
	var n int
	err := h.store.View(func(tx engine.Tx) error {
		fs, err := tx.FinishedActivities(wf)
		n = len(fs)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestAttemptTrailKeptAfterCompletion: an activity fails twice, then
// completes. Describe after the completion shows it finished with all three
// attempts and both failures; history's ActivityTaskStarted carries the
// winning attempt's start; once the retention has passed, it is gone from
// describe at once and from the store when the janitor comes by.
func TestAttemptTrailKeptAfterCompletion(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{AttemptRetention: 24 * time.Hour})
	h.startWithActivity("wf", &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000, MaxAttempts: 5}})
	failures := []*durablev1.Failure{
		{Type: "Unavailable", Message: "dial tcp 10.0.0.7:5432: connect: connection refused"},
		{Type: "Unavailable", Message: "dial tcp 10.0.0.8:5432: connect: connection refused"},
	}
	var starts []time.Time
	for i, f := range failures {
		task := h.pollActivity()
		if task == nil {
			t.Fatalf("attempt %d was not handed out", i+1)
		}
		starts = append(starts, h.clock.Now())
		h.clock.Advance(300 * time.Millisecond)
		h.fail(task, f)
		h.clock.Advance(activity.Backoff(&durablev1.RetryPolicy{InitialMs: 1000}, i+1))
	}
	task := h.pollActivity()
	if task == nil {
		t.Fatal("attempt 3 was not handed out")
	}
	winningStart := h.clock.Now()
	h.clock.Advance(700 * time.Millisecond)
	completedAt := h.clock.Now()
	h.complete(task)

	d := h.describe("wf")
	if n := len(d.GetPendingActivities()); n != 0 {
		t.Fatalf("%d pending activities after the completion, want 0", n)
	}
	if n := len(d.GetFinishedActivities()); n != 1 {
		t.Fatalf("%d finished activities, want 1", n)
	}
	fin := d.GetFinishedActivities()[0]
	if fin.GetOutcome() != engine.FinishedCompleted || !fin.GetFinishedTime().AsTime().Equal(completedAt) {
		t.Errorf("finished as %q at %v, want %q at %v", fin.GetOutcome(), fin.GetFinishedTime().AsTime(), engine.FinishedCompleted, completedAt)
	}
	trail := fin.GetActivity().GetAttempts()
	if len(trail) != 3 {
		t.Fatalf("%d attempts kept, want 3: %v", len(trail), trail)
	}
	for i, at := range trail {
		if at.GetAttempt() != int32(i+1) || at.GetIdentity() != "worker-1" || at.GetEndedTime() == nil {
			t.Errorf("attempt %d = %v, want number %d by worker-1, ended", i, at, i+1)
		}
	}
	for i, f := range failures {
		if got := trail[i].GetFailure(); got.GetMessage() != f.GetMessage() || !trail[i].GetStartedTime().AsTime().Equal(starts[i]) {
			t.Errorf("attempt %d: failure %v started %v, want %q started %v", i+1, got, trail[i].GetStartedTime().AsTime(), f.GetMessage(), starts[i])
		}
	}
	if trail[2].GetFailure() != nil {
		t.Errorf("the completed attempt carries a failure: %v", trail[2].GetFailure())
	}
	if got := trail[2].GetEndedTime().AsTime().Sub(trail[2].GetStartedTime().AsTime()); got != 700*time.Millisecond {
		t.Errorf("the completed attempt took %v, want 700ms", got)
	}

	var started, completed *durablev1.HistoryEvent
	for _, ev := range h.history("wf") {
		switch ev.GetType() {
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started = ev
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			completed = ev
		}
	}
	if started == nil || completed == nil || started.GetEventId()+1 != completed.GetEventId() {
		t.Fatalf("history lacks ActivityTaskStarted right before ActivityTaskCompleted: %v, %v", started, completed)
	}
	if !started.GetTime().AsTime().Equal(winningStart) || started.GetAttempt() != 3 {
		t.Errorf("ActivityTaskStarted at %v (attempt %d), want the winning attempt's start %v (attempt 3)",
			started.GetTime().AsTime(), started.GetAttempt(), winningStart)
	}
	if !completed.GetTime().AsTime().Equal(completedAt) {
		t.Errorf("ActivityTaskCompleted at %v, want %v", completed.GetTime().AsTime(), completedAt)
	}

	h.clock.Advance(23 * time.Hour)
	if n := len(h.describe("wf").GetFinishedActivities()); n != 1 {
		t.Fatalf("inside the retention: %d finished activities, want 1", n)
	}
	h.clock.Advance(time.Hour + time.Millisecond)
	if n := len(h.describe("wf").GetFinishedActivities()); n != 0 {
		t.Errorf("past the retention: %d finished activities shown, want 0", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.storedFinished("wf") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the janitor did not delete a finished activity past its retention")
		}
		h.clock.Advance(time.Hour)
		time.Sleep(time.Millisecond)
	}
}

// TestFinishedOutcomes: a non-retryable failure finishes an activity as
// failed; the activities a closing workflow leaves (queued and dead-lettered
// alike) finish as workflow_closed with their trail, without heartbeat
// details.
func TestFinishedOutcomes(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	ctx := context.Background()
	h.start("wf", "Order")
	wt := h.pollWorkflow()
	schedule := func(id string, maxAttempts int32) *durablev1.Command {
		return &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: id, ActivityType: "Charge",
			ActivityOptions: &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: maxAttempts}}}
	}
	if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{
		schedule("fails", 5), schedule("dies", 1), schedule("waits", 5),
	}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		task := h.pollActivity()
		switch task.GetActivityId() {
		case "fails":
			h.fail(task, &durablev1.Failure{Type: "Invalid", Message: "card 4242 expired", NonRetryable: true})
		case "dies":
			if _, err := h.e.RecordHeartbeat(ctx, &durablev1.HeartbeatRequest{TaskToken: task.GetTaskToken(), Details: []byte(`{"page":3}`)}); err != nil {
				t.Fatal(err)
			}
			h.fail(task, &durablev1.Failure{Type: "Unavailable", Message: "down"})
		default:
			t.Fatalf("unexpected task %s", task.GetActivityId())
		}
	}
	if d := h.describe("wf"); len(d.GetFinishedActivities()) != 1 || d.GetFinishedActivities()[0].GetOutcome() != engine.FinishedFailed {
		t.Fatalf("after a non-retryable failure: finished = %v, want one failed", d.GetFinishedActivities())
	}

	h.clock.Advance(time.Second)
	wt = h.pollWorkflow()
	if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{
		{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW},
	}}); err != nil {
		t.Fatal(err)
	}
	d := h.describe("wf")
	got := map[string]*durablev1.FinishedActivity{}
	for _, f := range d.GetFinishedActivities() {
		got[f.GetActivity().GetActivityId()] = f
	}
	want := map[string]string{"fails": engine.FinishedFailed, "dies": engine.FinishedWorkflowClosed, "waits": engine.FinishedWorkflowClosed}
	for id, outcome := range want {
		if got[id].GetOutcome() != outcome {
			t.Errorf("%s finished as %q, want %q", id, got[id].GetOutcome(), outcome)
		}
	}
	if ids := []string{d.GetFinishedActivities()[0].GetActivity().GetActivityId()}; ids[0] != "fails" {
		t.Errorf("finished activities not oldest first: %v", d.GetFinishedActivities())
	}
	dies := got["dies"].GetActivity()
	if dies.GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED || len(dies.GetAttempts()) != 1 ||
		dies.GetAttempts()[0].GetFailure().GetMessage() != "down" || dies.GetFailureFingerprint() == "" {
		t.Errorf("the dead letter was not kept as it was: %v", dies)
	}
	if len(dies.GetHeartbeatDetails()) != 0 || dies.GetLastHeartbeatTime() == nil {
		t.Errorf("heartbeat details %q kept (time %v), want the time without the details", dies.GetHeartbeatDetails(), dies.GetLastHeartbeatTime())
	}
	if waits := got["waits"].GetActivity(); len(waits.GetAttempts()) != 0 || waits.GetNextAttemptTime() != nil {
		t.Errorf("the queued activity was kept as %v, want no attempts and no next attempt time", waits)
	}
}
