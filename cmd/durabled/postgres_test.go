package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/internal/testdaemon"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestPostgresNodeLosesNothingAcknowledgedAcrossSIGKILL runs the real
// durabled on PostgreSQL: a workflow whose activity fails once and is
// retried, a SIGKILL between the failure and the retry, a second node
// under the first one's name refused while the first lives.
func TestPostgresNodeLosesNothingAcknowledgedAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := testdaemon.Exec(t, "", "--store", "postgres", "--postgres-dsn", dsn)
	if logs := d.Logs(); !strings.Contains(logs, "store=postgres") {
		t.Errorf("the listening line does not name the store:\n%s", logs)
	}
	if strings.Contains(d.Logs(), "password") || strings.Contains(d.Logs(), "sslmode") {
		t.Errorf("the logs repeat the DSN:\n%s", d.Logs())
	}
	// No memory budget applies to PostgreSQL, so no Go limit is set.
	if got := logField(t, d.Logs(), "msg=listening", "go_memory_limit"); got != "none" {
		t.Errorf("the listening line says go_memory_limit=%s, want none", got)
	}
	c := durablev1.NewDurableClient(dial(t, d.Addr))
	nodes, err := c.ListNodes(ctx, &durablev1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	name := logField(t, d.Logs(), "msg=listening", "node")
	if len(nodes.GetNodes()) != 1 || nodes.GetNodes()[0].GetName() != name || !nodes.GetNodes()[0].GetAlive() || nodes.GetAnsweredBy() != name {
		t.Errorf("ListNodes = %v, want the one node %q, alive", nodes, name)
	}
	if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "wf-1", WorkflowType: "T", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || len(wt.GetTaskToken()) == 0 {
		t.Fatalf("PollWorkflowTask = %v, %v; want the first workflow task", wt, err)
	}
	_, err = c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "a", ActivityType: "A",
		ActivityOptions: &durablev1.ActivityOptions{
			StartToCloseTimeout: durationpb.New(time.Minute),
			RetryPolicy:         &durablev1.RetryPolicy{MaxAttempts: 3, InitialMs: 200, MaxIntervalMs: 200},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	at, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || len(at.GetTasks()) != 1 {
		t.Fatalf("PollActivityTask = %v, %v; want one task", at, err)
	}
	if _, err := c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: at.GetTasks()[0].GetTaskToken(),
		Failure: &durablev1.Failure{Type: "Flaky", Message: "first attempt fails"}}); err != nil {
		t.Fatal(err)
	}

	// A second node under the first one's name is refused while it runs.
	code, stderr := testdaemon.Run(t, "--listen", "127.0.0.1:0", "--store", "postgres", "--postgres-dsn", dsn, "--node", name)
	if code != exitError || !strings.Contains(stderr, "is in use") {
		t.Fatalf("second node named %s: exit %d, want %d with the store's refusal; stderr:\n%s", name, code, exitError, stderr)
	}

	d.Kill()
	d.Restart() // under a name of its own: HOSTNAME and the new PID
	c = durablev1.NewDurableClient(dial(t, d.Addr))
	var retry *durablev1.ActivityTask
	waitUntil(t, "the retry after the restart", func() bool {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		r, err := c.PollActivityTask(pctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w"})
		if err == nil && len(r.GetTasks()) == 1 {
			retry = r.GetTasks()[0]
		}
		return retry != nil
	})
	if retry.GetAttempt() != 2 {
		t.Fatalf("after the restart the activity came back at attempt %d, want 2 (the acknowledged failure kept)", retry.GetAttempt())
	}
	if _, err := c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: retry.GetTaskToken()}); err != nil {
		t.Fatal(err)
	}
	wt, err = c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || len(wt.GetTaskToken()) == 0 {
		t.Fatalf("PollWorkflowTask = %v, %v; want the task for the activity's result", wt, err)
	}
	if _, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW,
	}}}); err != nil {
		t.Fatal(err)
	}
	desc, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: "wf-1"})
	if err != nil {
		t.Fatal(err)
	}
	if desc.GetWorkflow().GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED {
		t.Errorf("workflow status %v after the restart, want completed", desc.GetWorkflow().GetStatus())
	}
}

// TestPostgresNodeRestartedAtOnceUnderItsNameServes: a node SIGKILLed and
// started again at once under the same --node name (a supervisor's
// restart) finds its predecessor's row still alive; it waits for that
// heartbeat to go stale and serves, instead of exiting.
func TestPostgresNodeRestartedAtOnceUnderItsNameServes(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	d := testdaemon.Exec(t, "", "--store", "postgres", "--postgres-dsn", dsn, "--node", "edge-1")
	d.Kill()
	d.Restart()
	if !strings.Contains(d.Logs(), "waiting in case its holder has died") {
		t.Errorf("the restarted node did not say it waited for its name:\n%s", d.Logs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := durablev1.NewDurableClient(dial(t, d.Addr)).ListNodes(ctx, &durablev1.ListNodesRequest{})
	if err != nil || nodes.GetAnsweredBy() != "edge-1" {
		t.Fatalf("ListNodes = %v, %v; want an answer from edge-1", nodes, err)
	}
}
