package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestDaemonRunsWithTheSmallestMemoryBudget runs a workflow whose activity
// carries a 1 MiB input through a daemon given the smallest budget, which
// says what it took at start.
func TestDaemonRunsWithTheSmallestMemoryBudget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := start(t, t.TempDir(), "--memory-budget", "64MiB")
	if logs := d.Logs(); !strings.Contains(logs, "memory_budget=67108864") || !strings.Contains(logs, "go_memory_limit=50331648") {
		t.Errorf("the listening line does not name the budget and the Go limit:\n%s", logs)
	}
	c := durablev1.NewDurableClient(dial(t, d.Addr))
	if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "wf-1", WorkflowType: "T", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	input := make([]byte, 1<<20)
	rand.Read(input)
	_, err = c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "a", ActivityType: "A", Input: input,
		ActivityOptions: &durablev1.ActivityOptions{StartToCloseTimeout: durationpb.New(time.Minute)},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	at, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q"})
	if err != nil || len(at.GetTasks()) != 1 {
		t.Fatalf("PollActivityTask = %v, %v; want one task", at, err)
	}
	if !bytes.Equal(at.GetTasks()[0].GetInput(), input) {
		t.Errorf("the activity's 1 MiB input came back as %d other bytes", len(at.GetTasks()[0].GetInput()))
	}
	if _, err := c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: at.GetTasks()[0].GetTaskToken()}); err != nil {
		t.Fatal(err)
	}
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := d.Wait(); code != 0 {
		t.Fatalf("exit code %d, want 0; logs:\n%s", code, d.Logs())
	}
}
