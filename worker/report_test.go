package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/worker"
	"github.com/tinyllm/durable/workflow"
)

// TestWorkflowTaskReportIsRetriedWhileUnavailable: a daemon restarting while
// a worker reports a workflow task answers Unavailable; the worker reports
// again rather than leaving the task to its timeout (an hour here, so only a
// retried report lets the workflow finish).
func TestWorkflowTaskReportIsRetriedWhileUnavailable(t *testing.T) {
	t.Parallel()
	addr := testdaemon.Start(t, engine.Options{WorkflowTaskTimeout: time.Hour})
	var refused, completes atomic.Int32
	intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := req.(*durablev1.CompleteWorkflowTaskRequest); ok {
			completes.Add(1)
			if refused.CompareAndSwap(0, 1) {
				return status.Error(codes.Unavailable, "daemon restarting")
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.WithDialOptions(grpc.WithUnaryInterceptor(intercept)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	startWorker(t, c, "report", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(func(ctx workflow.Context) (string, error) { return "done", nil }, "Quick")
	})
	run, err := c.Start(ctx, "Quick", nil, client.StartOptions{TaskQueue: "report"})
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil || out != "done" {
		t.Fatalf("Get = %q, %v", out, err)
	}
	if n := completes.Load(); n != 2 {
		t.Errorf("%d CompleteWorkflowTask calls, want 2 (one refused, one retried)", n)
	}
}
