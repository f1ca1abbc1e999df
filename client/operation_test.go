package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// deadLetters dead-letters n activities of one workflow through the raw
// protocol.
func deadLetters(t *testing.T, c *client.Client, wf string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := c.Service()
	if _, err := svc.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "T", TaskQueue: wf}); err != nil {
		t.Fatal(err)
	}
	wt, err := svc.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: wf})
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*durablev1.Command
	for i := range n {
		cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: fmt.Sprint(i), ActivityType: "Charge",
			ActivityOptions: &durablev1.ActivityOptions{StartToCloseTimeout: durationpb.New(time.Minute), RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 1}}})
	}
	if _, err := svc.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
		t.Fatal(err)
	}
	for failed := 0; failed < n; {
		at, err := svc.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: wf, MaxTasks: int32(n)})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range at.GetTasks() {
			if _, err := svc.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: &durablev1.Failure{Type: "Down"}}); err != nil {
				t.Fatal(err)
			}
			failed++
		}
	}
}

// TestWaitOperationFollowsProgress: a dry run starts nothing; RedriveAll
// answers at once; WaitOperation reports progress as it moves and returns
// the operation as it completed; a cancelled one comes back cancelled; a
// context that ends stops the wait, not the operation.
func TestWaitOperationFollowsProgress(t *testing.T) {
	t.Parallel()
	addr := testdaemon.Start(t, engine.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadLetters(t, c, "wait-1", 4)
	f := client.DeadLetterFilter{WorkflowID: "wait-1"}

	dry, err := c.RedriveDryRun(ctx, f, client.WithRate(10))
	if err != nil || dry.GetMatched() != 4 || len(dry.GetPreview()) != 4 {
		t.Fatalf("dry run = %v, %v", dry, err)
	}
	if ops, _ := c.ListOperations(ctx, 0); len(ops) != 0 {
		t.Fatalf("a dry run started %v", ops)
	}

	maxAttempts := int32(2)
	op, err := c.RedriveAll(ctx, f, client.WithRate(10), client.WithReason("INC-8"), client.WithEdit(&durablev1.OptionsPatch{MaxAttempts: &maxAttempts}))
	if err != nil {
		t.Fatal(err)
	}
	if op.GetMatched() != 4 || op.GetReason() != "INC-8" || op.GetEdit().GetMaxAttempts() != 2 {
		t.Fatalf("started %v", op)
	}
	var seen []int64
	done, err := c.WaitOperation(ctx, op.GetId(), func(p *durablev1.Operation) { seen = append(seen, p.GetReleased()) })
	if err != nil {
		t.Fatal(err)
	}
	if done.GetState() != durablev1.OperationState_OPERATION_STATE_COMPLETED || done.GetReleased() != 4 {
		t.Fatalf("waited for %v", done)
	}
	if len(seen) < 2 || seen[len(seen)-1] != 4 {
		t.Errorf("progress seen %v, want it to move and end at 4", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Errorf("progress %v reported without moving", seen)
		}
	}

	deadLetters(t, c, "wait-2", 3)
	slow, err := c.RedriveAll(ctx, client.DeadLetterFilter{WorkflowID: "wait-2"}, client.WithRate(0.001))
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	if _, err := c.WaitOperation(short, slow.GetId(), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitOperation past its context = %v, want DeadlineExceeded", err)
	}
	for first := false; !first; {
		o, err := c.DescribeOperation(ctx, slow.GetId())
		if err != nil {
			t.Fatal(err)
		}
		first = o.GetReleased() == 1
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.CancelOperation(ctx, slow.GetId(), "enough"); err != nil {
		t.Fatal(err)
	}
	got, err := c.WaitOperation(ctx, slow.GetId(), nil)
	if err != nil || got.GetState() != durablev1.OperationState_OPERATION_STATE_CANCELLED || got.GetLeft() != 2 {
		t.Fatalf("after the cancel: %v, %v", got, err)
	}
	if ops, err := c.ListOperations(ctx, 1); err != nil || len(ops) != 1 || ops[0].GetId() != slow.GetId() {
		t.Errorf("ListOperations(1) = %v, %v; want the newest", ops, err)
	}
}
