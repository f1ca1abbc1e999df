package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The codes a worker and an operator see along one activity's life over real
// gRPC: a dead letter is listed, redriven once (a second redrive is
// FailedPrecondition, never Unavailable), and a stale token is refused.
func TestDeadLetterRedriveAndStaleTokenCodes(t *testing.T) {
	t.Parallel()
	c := setup(t)
	wf, q := uid("wf-flow"), uid("q-flow")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	code := func(err error, want codes.Code) {
		t.Helper()
		if got := status.Code(err); got != want {
			t.Fatalf("code = %v (%v), want %v", got, err, want)
		}
	}

	_, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "T", TaskQueue: q})
	must(err)
	wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: q, Identity: "w"})
	must(err)
	if len(wt.GetTaskToken()) == 0 {
		t.Fatal("no workflow task")
	}
	_, err = c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{
		schedule("1", func(cmd *durablev1.Command) {
			cmd.ActivityOptions = &durablev1.ActivityOptions{
				StartToCloseTimeout: durationpb.New(time.Minute),
				RetryPolicy:         &durablev1.RetryPolicy{MaxAttempts: 1},
			}
		}),
	}})
	must(err)
	// The same workflow task cannot be completed twice.
	_, err = c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken()})
	code(err, codes.FailedPrecondition)

	at, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: q})
	must(err)
	if len(at.GetTasks()) != 1 {
		t.Fatalf("polled %d activity tasks, want 1", len(at.GetTasks()))
	}
	first := at.GetTasks()[0].GetTaskToken()
	// Not dead-lettered yet: redrive is FailedPrecondition.
	_, err = c.RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: wf, ActivityId: "1"})
	code(err, codes.FailedPrecondition)
	_, err = c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: first, Failure: &durablev1.Failure{Type: "Boom"}})
	must(err)

	dl, err := c.ListDeadLetters(ctx, &durablev1.ListDeadLettersRequest{WorkflowId: wf})
	must(err)
	if len(dl.GetDeadLetters()) != 1 || dl.GetDeadLetters()[0].GetLastFailure().GetType() != "Boom" {
		t.Fatalf("dead letters = %v, want activity 1 failed with Boom", dl.GetDeadLetters())
	}
	_, err = c.RecordHeartbeat(ctx, &durablev1.HeartbeatRequest{TaskToken: first})
	code(err, codes.FailedPrecondition)
	_, err = c.RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: wf, ActivityId: "1"})
	must(err)
	_, err = c.RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: wf, ActivityId: "1"})
	code(err, codes.FailedPrecondition)

	at, err = c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: q})
	must(err)
	if len(at.GetTasks()) != 1 || at.GetTasks()[0].GetAttempt() != 1 {
		t.Fatalf("after redrive polled %v, want attempt 1", at.GetTasks())
	}
	// The token of the attempt before the redrive stays stale.
	_, err = c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: first})
	code(err, codes.FailedPrecondition)
	_, err = c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: at.GetTasks()[0].GetTaskToken(), Result: []byte("ok")})
	must(err)
}

// Watch is served as a stream: a snapshot that includes a started workflow,
// then SNAPSHOT_DONE.
func TestWatchStreamsSnapshot(t *testing.T) {
	t.Parallel()
	c := setup(t)
	wf := uid("wf-watch")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "T", TaskQueue: uid("q-watch")}); err != nil {
		t.Fatal(err)
	}
	stream, err := c.Watch(ctx, &durablev1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("Recv before SNAPSHOT_DONE: %v", err)
		}
		for _, w := range ev.GetWorkflows() {
			seen = seen || w.GetWorkflowId() == wf
		}
		if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
			break
		}
	}
	if !seen {
		t.Errorf("snapshot lacks %s", wf)
	}
}
