package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// deadLetters dead-letters n activities of a type of their own on the
// shared server and returns the type, so that a filter on it selects
// exactly them.
func deadLetters(t *testing.T, c durablev1.DurableClient, n int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wf, q, typ := uid("wf-op"), uid("q-op"), uid("Type")
	if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "T", TaskQueue: q}); err != nil {
		t.Fatal(err)
	}
	wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: q})
	if err != nil || len(wt.GetTaskToken()) == 0 {
		t.Fatalf("workflow task: %v", err)
	}
	var cmds []*durablev1.Command
	for i := range n {
		cmds = append(cmds, schedule(fmt.Sprint(i), func(cmd *durablev1.Command) {
			cmd.ActivityType = typ
			cmd.ActivityOptions = &durablev1.ActivityOptions{StartToCloseTimeout: durationpb.New(time.Minute), RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 1}}
		}))
	}
	if _, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
		t.Fatal(err)
	}
	for failed := 0; failed < n; {
		at, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: q, MaxTasks: int32(n)})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range at.GetTasks() {
			if _, err := c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: &durablev1.Failure{Type: "Boom"}}); err != nil {
				t.Fatal(err)
			}
			failed++
		}
	}
	return typ
}

// The operation calls over real gRPC: a dry run, a start that answers at
// once, describe and list, cancel, and the codes of what cannot be done.
func TestRedriveOperationOverGRPC(t *testing.T) {
	t.Parallel()
	c := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	typ := deadLetters(t, c, 3)
	filter := &durablev1.DeadLetterFilter{ActivityType: typ}

	dry, err := c.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{Filter: filter, DryRun: true})
	if err != nil || dry.GetMatched() != 3 || len(dry.GetPreview()) != 3 || dry.GetOperation() != nil {
		t.Fatalf("dry run = %v, %v", dry, err)
	}

	// Slow enough that it is still running when cancelled: the first letter
	// goes at once, the next one a thousand seconds later.
	resp, err := c.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{Filter: filter, Rate: 0.001, Reason: "INC-11"})
	if err != nil {
		t.Fatal(err)
	}
	op := resp.GetOperation()
	if op.GetState() != durablev1.OperationState_OPERATION_STATE_RUNNING || op.GetMatched() != 3 || op.GetPrincipal() != "local" || op.GetAuditId() == 0 {
		t.Fatalf("started %v", op)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.DescribeOperation(ctx, &durablev1.DescribeOperationRequest{Id: op.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetReleased() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first letter was not released: %v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	list, err := c.ListOperations(ctx, &durablev1.ListOperationsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var listed bool
	for _, o := range list.GetOperations() {
		listed = listed || o.GetId() == op.GetId()
	}
	if !listed {
		t.Errorf("%s is not in the list", op.GetId())
	}
	got, err := c.CancelOperation(ctx, &durablev1.CancelOperationRequest{Id: op.GetId(), Reason: "wrong filter"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetState() != durablev1.OperationState_OPERATION_STATE_CANCELLED || got.GetReleased() != 1 || got.GetLeft() != 2 || got.GetCancelledBy() != "local" {
		t.Errorf("cancelled %v", got)
	}
	_, err = c.CancelOperation(ctx, &durablev1.CancelOperationRequest{Id: op.GetId()})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("second cancel: %v, want FailedPrecondition", err)
	}
	dl, err := c.ListDeadLetters(ctx, &durablev1.ListDeadLettersRequest{ActivityType: typ})
	if err != nil || len(dl.GetDeadLetters()) != 2 {
		t.Errorf("left in the DLQ: %d, %v; want 2", len(dl.GetDeadLetters()), err)
	}
}
