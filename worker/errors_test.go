package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/worker"
	"github.com/tinyllm/durable/workflow"
)

func TestWorkerMapsActivityErrors(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	var runs atomic.Int32
	charge := func(ctx context.Context, card string) (string, error) {
		runs.Add(1)
		return "", activity.NewNonRetryable("CardDeclined", "card "+card+" was declined")
	}
	order := func(ctx workflow.Context, card string) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &workflow.RetryPolicy{InitialInterval: 10 * time.Millisecond, MaximumAttempts: 5},
		})
		var out string
		err := workflow.ExecuteActivity(ctx, "Charge", card).Get(ctx, &out)
		var ae *activity.Error
		if !errors.As(err, &ae) || ae.Type != "CardDeclined" || !ae.NoRetry {
			return "", activity.NewNonRetryable("Unexpected", fmt.Sprintf("activity error not typed: %v", err))
		}
		return out, err
	}
	startWorker(t, c, "orders", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(order, "Order")
		w.RegisterActivityWithName(charge, "Charge")
	})

	ctx := testCtx(t)
	run, err := c.Start(ctx, "Order", "4242", client.StartOptions{ID: "order-1", TaskQueue: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(ctx, nil)
	var ae *activity.Error
	if !client.IsWorkflowFailed(err) || !errors.As(err, &ae) || ae.Type != "CardDeclined" {
		t.Fatalf("Get = %v, want the workflow failed with CardDeclined", err)
	}

	h := history(t, c, run.ID)
	var started, failed *durablev1.HistoryEvent
	for _, ev := range h {
		switch ev.GetType() {
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started = ev
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED:
			failed = ev
		}
	}
	if n := countEvents(h, durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_STARTED); n != 1 || started.GetAttempt() != 1 {
		t.Fatalf("ActivityTaskStarted events = %d (last attempt %d), want one, attempt 1", n, started.GetAttempt())
	}
	if f := failed.GetFailure(); f.GetType() != "CardDeclined" || !f.GetNonRetryable() {
		t.Fatalf("ActivityTaskFailed failure = %v, want CardDeclined non-retryable", f)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("activity ran %d times, want 1", n)
	}
}
