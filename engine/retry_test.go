package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const (
	evStarted      = durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_STARTED
	evFailed       = durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED
	evDeadLettered = durablev1.EventType_EVENT_TYPE_ACTIVITY_DEAD_LETTERED
	evRedriven     = durablev1.EventType_EVENT_TYPE_ACTIVITY_REDRIVEN
	evWTScheduled  = durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
)

// TestRetryScheduleUnderFakeClock runs the worked example with jitter off:
// retries due at exactly 1, 2 and 4 s after each failure (not a millisecond
// earlier), the 4th failure dead-letters with ActivityDeadLettered{attempt 4}
// and no workflow task, and a redrive delivers attempt 1 with the same key.
func TestRetryScheduleUnderFakeClock(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	policy := &durablev1.RetryPolicy{InitialMs: 1000, Backoff: 2, MaxIntervalMs: 10_000, MaxAttempts: 4}
	h.startWithActivity("wf-1", &durablev1.ActivityOptions{StartToCloseTimeout: dur(time.Minute), RetryPolicy: policy})

	task := h.pollActivity()
	if task == nil || task.GetAttempt() != 1 {
		t.Fatalf("first poll = %v, want attempt 1", task)
	}
	key := task.GetIdempotencyKey()
	if key != "wf-1/1" {
		t.Errorf("idempotency key = %q, want wf-1/1", key)
	}
	historyBefore := len(h.history("wf-1"))
	waits := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	for i, wait := range waits {
		attempt := int32(i + 1)
		h.fail(task, &durablev1.Failure{Type: "Unavailable", Message: "downstream down"})

		d := h.describe("wf-1").GetPendingActivities()[0]
		if d.GetState() != durablev1.ActivityState_ACTIVITY_STATE_RETRYING || d.GetAttempt() != attempt+1 || d.GetMaxAttempts() != 4 {
			t.Fatalf("after failure %d: state %v attempt %d/%d", attempt, d.GetState(), d.GetAttempt(), d.GetMaxAttempts())
		}
		if got, want := d.GetNextAttemptTime().AsTime(), h.clock.Now().Add(wait); !got.Equal(want) {
			t.Errorf("after failure %d: next attempt at %v, want %v", attempt, got, want)
		}
		if d.GetLastFailure().GetType() != "Unavailable" {
			t.Errorf("describe last failure = %v", d.GetLastFailure())
		}
		if n := len(h.history("wf-1")); n != historyBefore {
			t.Errorf("a retryable failure wrote history: %d events, want %d", n, historyBefore)
		}

		h.clock.Advance(wait - time.Millisecond)
		if early := h.pollActivity(); early != nil {
			t.Fatalf("attempt %d pollable 1 ms early", early.GetAttempt())
		}
		h.clock.Advance(time.Millisecond)
		task = h.pollActivity()
		if task == nil || task.GetAttempt() != attempt+1 {
			t.Fatalf("at +%v: poll = %v, want attempt %d", wait, task, attempt+1)
		}
		if task.GetIdempotencyKey() != key {
			t.Errorf("attempt %d key = %q, want %q", task.GetAttempt(), task.GetIdempotencyKey(), key)
		}
	}

	// The 4th failure reaches max_attempts: dead letter, no workflow task.
	h.fail(task, &durablev1.Failure{Type: "Unavailable", Message: "still down"})
	events := h.history("wf-1")
	last := events[len(events)-1]
	if last.GetType() != evDeadLettered || last.GetAttempt() != 4 || last.GetFailure().GetType() != "Unavailable" {
		t.Fatalf("last event = %v, want ActivityDeadLettered{attempt 4, Unavailable}", last)
	}
	if wt := h.pollWorkflow(); wt != nil {
		t.Error("dead-lettering scheduled a workflow task")
	}
	h.clock.Advance(time.Hour)
	if again := h.pollActivity(); again != nil {
		t.Fatalf("a dead letter was delivered: attempt %d", again.GetAttempt())
	}

	d := h.describe("wf-1")
	if pa := d.GetPendingActivities(); len(pa) != 1 || pa[0].GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED || len(pa[0].GetAttempts()) != 4 {
		t.Fatalf("describe = %v, want one dead letter with 4 attempts recorded", pa)
	}
	if d.GetWorkflow().GetDeadLetters() != 1 || d.GetWorkflow().GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
		t.Errorf("workflow = %v, want running with one dead letter", d.GetWorkflow())
	}

	list, err := h.e.ListDeadLetters(context.Background(), &durablev1.ListDeadLettersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if dl := list.GetDeadLetters(); len(dl) != 1 || dl[0].GetWorkflowId() != "wf-1" || dl[0].GetActivityId() != "1" ||
		dl[0].GetActivityType() != "Charge" || dl[0].GetAttempt() != 4 || dl[0].GetLastFailure().GetType() != "Unavailable" {
		t.Fatalf("ListDeadLetters = %v", dl)
	}
	for _, f := range []*durablev1.ListDeadLettersRequest{{FailureType: "Other"}, {ActivityType: "Other"}, {WorkflowId: "wf-2"}} {
		if r, _ := h.e.ListDeadLetters(context.Background(), f); len(r.GetDeadLetters()) != 0 {
			t.Errorf("filter %v matched %v", f, r.GetDeadLetters())
		}
	}

	if _, err := h.e.RedriveDeadLetter(context.Background(), engine.Actor{Principal: "local", Role: "operator"}, &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf-1", ActivityId: "9"}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("redrive of an unknown activity: %v, want ErrNotFound", err)
	}
	if _, err := h.e.RedriveDeadLetter(context.Background(), engine.Actor{Principal: "local", Role: "operator"}, &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf-1", ActivityId: "1"}); err != nil {
		t.Fatal(err)
	}
	if r, _ := h.e.ListDeadLetters(context.Background(), &durablev1.ListDeadLettersRequest{}); len(r.GetDeadLetters()) != 0 {
		t.Errorf("dead letter still listed after redrive: %v", r.GetDeadLetters())
	}
	task = h.pollActivity()
	if task == nil || task.GetAttempt() != 1 || task.GetIdempotencyKey() != key {
		t.Fatalf("after redrive: poll = %v, want attempt 1 with key %q", task, key)
	}
	if _, err := h.e.RedriveDeadLetter(context.Background(), engine.Actor{Principal: "local", Role: "operator"}, &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf-1", ActivityId: "1"}); !errors.Is(err, engine.ErrNotDeadLettered) {
		t.Errorf("redrive of a running activity: %v, want ErrNotDeadLettered", err)
	}
	if n := count(h.history("wf-1"), evRedriven); n != 1 {
		t.Errorf("%d ActivityRedriven events, want 1", n)
	}
}

// TestNonRetryableStops: a failure marked non-retryable and a failure whose
// type the policy lists both end the activity after one attempt with
// ActivityTaskStarted and ActivityTaskFailed, and wake the workflow.
func TestNonRetryableStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		policy  *durablev1.RetryPolicy
		failure *durablev1.Failure
	}{
		{"MarkedByActivity", &durablev1.RetryPolicy{MaxAttempts: 5}, &durablev1.Failure{Type: "BadSpec", Message: "no size", NonRetryable: true}},
		{"ListedByPolicy", &durablev1.RetryPolicy{MaxAttempts: 5, NonRetryable: []string{"ExitCode65"}}, &durablev1.Failure{Type: "ExitCode65", Message: "exit status 65"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, engine.Options{})
			h.startWithActivity("wf", &durablev1.ActivityOptions{RetryPolicy: tc.policy})
			task := h.pollActivity()
			h.fail(task, tc.failure)

			events := h.history("wf")
			n := len(events)
			if n < 3 || events[n-3].GetType() != evStarted || events[n-2].GetType() != evFailed || events[n-1].GetType() != evWTScheduled {
				t.Fatalf("history ends %v, want ActivityTaskStarted, ActivityTaskFailed, WorkflowTaskScheduled", eventTypes(events))
			}
			if f := events[n-2].GetFailure(); f.GetType() != tc.failure.GetType() || events[n-3].GetAttempt() != 1 {
				t.Errorf("failed event = %v (attempt %d)", f, events[n-3].GetAttempt())
			}
			h.clock.Advance(time.Hour)
			if again := h.pollActivity(); again != nil {
				t.Fatalf("retried a non-retryable failure: attempt %d", again.GetAttempt())
			}
			if pa := h.describe("wf").GetPendingActivities(); len(pa) != 0 {
				t.Errorf("still pending: %v", pa)
			}
			if wt := h.pollWorkflow(); wt == nil {
				t.Error("the workflow was not woken")
			}
		})
	}
}
