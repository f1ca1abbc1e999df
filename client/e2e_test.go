package client_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/worker"
	"github.com/tinyllm/durable/workflow"
)

func Nap(ctx workflow.Context, d time.Duration) (time.Duration, error) {
	start := workflow.Now(ctx)
	workflow.Sleep(ctx, d)
	return workflow.Now(ctx).Sub(start), nil
}

func TestClientAgainstDaemon(t *testing.T) {
	t.Parallel()
	addr := testdaemon.Start(t, engine.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	events, errc := c.Watch(ctx)
	run, err := c.Start(ctx, "Nap", 50*time.Millisecond, client.StartOptions{ID: "nap-1", TaskQueue: "naps"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "Nap", 0, client.StartOptions{ID: "nap-1", TaskQueue: "naps"}); err == nil {
		t.Fatal("starting the same id twice succeeded")
	}

	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if err := run.Get(short, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get without a worker = %v, want DeadlineExceeded", err)
	}
	running, err := c.ListWorkflows(ctx, durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING)
	if err != nil || len(running) != 1 || running[0].GetWorkflowId() != "nap-1" {
		t.Fatalf("ListWorkflows(running) = %v, %v; want nap-1", running, err)
	}
	h, err := c.History(ctx, run.ID)
	if err != nil || len(h) == 0 || h[0].GetType() != durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
		t.Fatalf("History = %v, %v; want it to open with WorkflowExecutionStarted", h, err)
	}

	w := worker.New(c, "naps", worker.Options{Logger: slog.New(slog.DiscardHandler)})
	w.RegisterWorkflow(Nap)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var slept time.Duration
	if err := run.Get(ctx, &slept); err != nil {
		t.Fatal(err)
	}
	if slept < 50*time.Millisecond {
		t.Fatalf("workflow clock advanced %v over a 50ms durable sleep", slept)
	}
	d, err := c.Describe(ctx, run.ID)
	if err != nil || d.GetWorkflow().GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED {
		t.Fatalf("Describe = %v, %v; want completed", d, err)
	}
	if _, err := c.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	if dl, err := c.ListDeadLetters(ctx, client.DeadLetterFilter{}); err != nil || len(dl) != 0 {
		t.Fatalf("ListDeadLetters = %v, %v; want none", dl, err)
	}

	sawDone := false
	for ev := range events {
		if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
			sawDone = true
			cancel() // unsubscribing closes the channels
		}
	}
	if err := <-errc; err != nil || !sawDone {
		t.Fatalf("Watch ended with %v, snapshot done %v", err, sawDone)
	}
}
