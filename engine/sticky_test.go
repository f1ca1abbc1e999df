package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// stickyPoll polls queue "q" as session (empty: a raw-protocol poll).
func (h *harness) stickyPoll(session string) *durablev1.PollWorkflowTaskResponse {
	h.t.Helper()
	r, err := h.e.PollWorkflowTask(now(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w", StickySession: session})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(r.GetTaskToken()) == 0 {
		h.t.Fatal("no workflow task")
	}
	return r
}

func (h *harness) completeTask(wt *durablev1.PollWorkflowTaskResponse, activityIDs ...string) {
	h.t.Helper()
	var cmds []*durablev1.Command
	for _, id := range activityIDs {
		cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: id, ActivityType: "Charge"})
	}
	if _, err := h.e.CompleteWorkflowTask(context.Background(), &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
		h.t.Fatal(err)
	}
}

// completeActivity completes the next activity of queue "q", which makes the
// workflow's next task.
func (h *harness) completeActivity() {
	h.t.Helper()
	if _, err := h.e.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: h.pollActivity().GetTaskToken()}); err != nil {
		h.t.Fatal(err)
	}
}

// checkWhole checks that a task carries the whole history through its
// WorkflowTaskStarted, with no start id: what a raw-protocol client gets.
func (h *harness) checkWhole(wt *durablev1.PollWorkflowTaskResponse) {
	h.t.Helper()
	all := h.history(wt.GetWorkflowId())
	want := all[:len(wt.GetHistory())]
	if wt.GetHistoryStartEventId() != 0 || len(want) == 0 || want[len(want)-1].GetType() != durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED ||
		!slices.Equal(eventTypes(wt.GetHistory()), eventTypes(want)) || wt.GetHistory()[0].GetEventId() != 1 {
		h.t.Fatalf("task history from %d = %v, want the whole history %v", wt.GetHistoryStartEventId(), eventTypes(wt.GetHistory()), eventTypes(want))
	}
}

func TestStickySessionGetsOnlyTheEventsAfterItsCompletedTask(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.start("wf", "T")
	first := h.stickyPoll("a")
	h.checkWhole(first) // nothing remembered yet
	h.completeTask(first, "1", "2")
	h.completeActivity()

	second := h.stickyPoll("a")
	if got := second.GetHistoryStartEventId(); got != 4 {
		t.Fatalf("history starts at %d, want 4 (after the first task's Started, event 3)", got)
	}
	want := []durablev1.EventType{
		durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
		durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
		durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
		durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_STARTED,
		durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
		durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
		durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED,
	}
	if got := eventTypes(second.GetHistory()); !slices.Equal(got, want) || second.GetHistory()[0].GetEventId() != 4 {
		t.Fatalf("partial history = %v from event %d, want %v from 4", got, second.GetHistory()[0].GetEventId(), want)
	}

	// The rest is there for the task's holder, and only for it.
	head, err := h.e.GetWorkflowTaskHistory(context.Background(), &durablev1.GetWorkflowTaskHistoryRequest{TaskToken: second.GetTaskToken(), BeforeEventId: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := head.GetEvents(); len(got) != 3 || got[0].GetEventId() != 1 || got[2].GetType() != durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED {
		t.Fatalf("history before event 4 = %v, want events 1 to 3", eventTypes(got))
	}
	all, err := h.e.GetWorkflowTaskHistory(context.Background(), &durablev1.GetWorkflowTaskHistoryRequest{TaskToken: second.GetTaskToken()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(all.GetEvents()); n != 10 {
		t.Fatalf("the task's whole history has %d events, want 10", n)
	}
	h.completeTask(second)
	if _, err := h.e.GetWorkflowTaskHistory(context.Background(), &durablev1.GetWorkflowTaskHistoryRequest{TaskToken: second.GetTaskToken()}); !errors.Is(err, engine.ErrStaleTask) {
		t.Fatalf("history of a completed task = %v, want ErrStaleTask", err)
	}
}

func TestWholeHistoryUnlessTheSameSessionCompletedThePreviousTask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// between runs after the first task, leased by session "a", was
		// completed with two activities; it returns the session of the
		// poll that must get the whole history.
		between func(h *harness) string
	}{
		{"OtherSession", func(h *harness) string {
			h.completeActivity()
			return "b"
		}},
		{"RawProtocolPoll", func(h *harness) string {
			h.completeActivity()
			return ""
		}},
		{"AfterAnotherSessionRanATask", func(h *harness) string {
			h.completeActivity()
			h.completeTask(h.stickyPoll("b"))
			h.completeActivity()
			return "a"
		}},
		{"FailedTask", func(h *harness) string {
			h.completeActivity()
			wt := h.stickyPoll("a")
			if wt.GetHistoryStartEventId() <= 1 {
				h.t.Fatal("the task before the failure was not partial")
			}
			if _, err := h.e.FailWorkflowTask(context.Background(), &durablev1.FailWorkflowTaskRequest{TaskToken: wt.GetTaskToken(),
				Failure: &durablev1.Failure{Type: activity.TypeNonDeterminism, Message: "changed"}}); err != nil {
				h.t.Fatal(err)
			}
			h.clock.Advance(time.Second) // the retry's backoff
			return "a"
		}},
		{"TimedOutTask", func(h *harness) string {
			h.completeActivity()
			h.stickyPoll("a")
			h.clock.Advance(11 * time.Second) // past the task's lease
			h.clock.Advance(time.Second)      // the retry's backoff
			return "a"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setup(t, engine.Options{})
			h.start("wf", "T")
			h.completeTask(h.stickyPoll("a"), "1", "2")
			session := tc.between(h)
			var wt *durablev1.PollWorkflowTaskResponse
			deadline := time.Now().Add(10 * time.Second)
			for wt == nil { // a timed-out task is retried by the timer loop
				r, err := h.e.PollWorkflowTask(now(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w", StickySession: session})
				if err != nil {
					t.Fatal(err)
				}
				if len(r.GetTaskToken()) > 0 {
					wt = r
				} else if time.Now().After(deadline) {
					t.Fatal("no workflow task")
				}
			}
			h.checkWhole(wt)
		})
	}
}
