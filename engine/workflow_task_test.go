package engine_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestWorkflowTaskFailureRetriesOrFailsTheWorkflow: a retryable workflow task
// failure (a panic) is retried after the backoff; a non-retryable one
// (commands the daemon refused) fails the workflow with that failure at once,
// drops what it left pending and is never handed out again.
func TestWorkflowTaskFailureRetriesOrFailsTheWorkflow(t *testing.T) {
	t.Parallel()
	refused := &durablev1.Failure{Type: activity.TypeCommandsRefused, NonRetryable: true,
		Message: "commands[0].input: must be at most 1024 bytes, got 4096"}
	tests := []struct {
		name       string
		failure    *durablev1.Failure
		wantStatus durablev1.WorkflowStatus
		wantEvents []durablev1.EventType
	}{
		{"RetryableIsRetried", &durablev1.Failure{Type: activity.TypePanic, Message: "nil map"},
			durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING,
			[]durablev1.EventType{durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED, durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED}},
		{"NonRetryableFailsTheWorkflow", refused,
			durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED,
			[]durablev1.EventType{durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED, durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_FAILED}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := setup(t, engine.Options{})
			// A first task schedules two activities; the first one's
			// completion makes the task that is then failed, while the
			// second is still pending.
			h.start("wf", "T")
			first := h.pollWorkflow()
			schedule := func(id string) *durablev1.Command {
				return &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: id, ActivityType: "Charge"}
			}
			if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: first.GetTaskToken(),
				Commands: []*durablev1.Command{schedule("1"), schedule("2")}}); err != nil {
				t.Fatal(err)
			}
			if _, err := h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: h.pollActivity().GetTaskToken()}); err != nil {
				t.Fatal(err)
			}
			wt := h.pollWorkflow()
			if _, err := h.e.FailWorkflowTask(ctx, &durablev1.FailWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Identity: "w", Failure: tc.failure}); err != nil {
				t.Fatal(err)
			}
			h.clock.Advance(time.Second) // the backoff of a retried workflow task
			again := h.pollWorkflow()

			d := h.describe("wf")
			if got := d.GetWorkflow().GetStatus(); got != tc.wantStatus {
				t.Fatalf("status = %v, want %v", got, tc.wantStatus)
			}
			events := h.history("wf")
			if got := eventTypes(events)[len(events)-2:]; !slices.Equal(got, tc.wantEvents) {
				t.Errorf("history ends with %v, want %v", got, tc.wantEvents)
			}
			if !tc.failure.GetNonRetryable() {
				if again == nil || again.GetAttempt() != 2 {
					t.Fatalf("poll after the backoff = %v, want attempt 2", again)
				}
				return
			}
			if again != nil {
				t.Errorf("a failed workflow handed out another task: %v", again)
			}
			if f := d.GetWorkflow().GetFailure(); !proto.Equal(f, tc.failure) {
				t.Errorf("workflow failure = %v, want %v", f, tc.failure)
			}
			if n := len(d.GetPendingActivities()); n != 0 {
				t.Errorf("%d pending activities left behind by the failed workflow", n)
			}
			if f := events[len(events)-2].GetFailure(); !proto.Equal(f, tc.failure) {
				t.Errorf("WorkflowTaskFailed failure = %v, want %v", f, tc.failure)
			}
		})
	}
}

// TestListWorkflowsPageTokens: ListWorkflows pages with tokens of its own and
// refuses any other — a bare workflow id, another list's cursor, garbage —
// as an *InvalidError naming next_page_token.
func TestListWorkflowsPageTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := setup(t, engine.Options{})
	var want []string
	for i := range 5 {
		id := "wf-" + strconv.Itoa(i)
		h.start(id, "T")
		want = append(want, id)
	}
	var got []string
	var token []byte
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("ListWorkflows never ran out of pages")
		}
		resp, err := h.e.ListWorkflows(ctx, &durablev1.ListWorkflowsRequest{PageSize: 2, NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range resp.GetWorkflows() {
			got = append(got, w.GetWorkflowId())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
		if string(token) == got[len(got)-1] {
			t.Fatalf("page token %q is the last id in clear", token)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged ids = %v, want %v", got, want)
	}

	foreign := map[string][]byte{
		"BareID":           []byte("wf-1"),
		"DeadLetterCursor": {0x12, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 'w', 'f', '1'},
		"AuditCursor":      append([]byte{0x40}, make([]byte, 16)...),
		"Garbage":          {0xff, 0xfe},
	}
	for name, tok := range foreign {
		t.Run(name, func(t *testing.T) {
			_, err := h.e.ListWorkflows(ctx, &durablev1.ListWorkflowsRequest{NextPageToken: tok})
			var ie *engine.InvalidError
			if !errors.As(err, &ie) || ie.Field != "next_page_token" {
				t.Fatalf("ListWorkflows(token %q) = %v, want an InvalidError naming next_page_token", tok, err)
			}
		})
	}
}
