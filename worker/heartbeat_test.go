package worker_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/worker"
	"github.com/tinyllm/durable/workflow"
)

// recorder is a client interceptor that logs the worker's heartbeat and
// report calls in order, and can answer heartbeats with a stale lease.
type recorder struct {
	mu        sync.Mutex
	calls     []string
	staleNext atomic.Bool
}

func (r *recorder) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var note string
	switch m := req.(type) {
	case *durablev1.HeartbeatRequest:
		note = "heartbeat " + string(m.GetDetails())
		if r.staleNext.CompareAndSwap(true, false) {
			r.log(note + " (stale)")
			return status.Error(codes.FailedPrecondition, "lease is stale")
		}
	case *durablev1.CompleteActivityTaskRequest:
		note = "complete"
	case *durablev1.FailActivityRequest:
		note = "fail " + m.GetFailure().GetType()
	}
	if note != "" {
		r.log(note)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (r *recorder) log(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func dialRecorded(t *testing.T, addr string, r *recorder) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.WithDialOptions(grpc.WithUnaryInterceptor(r.intercept)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func singleActivity(name string, opts workflow.ActivityOptions) func(ctx workflow.Context) error {
	return func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, opts)
		return workflow.ExecuteActivity(ctx, name, nil).Get(ctx, nil)
	}
}

func TestHeartbeatsAreThrottledAndTheLastIsSentBeforeReporting(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	rec := &recorder{}
	burst := func(ctx context.Context) error {
		for i := 1; i <= 50; i++ {
			activity.RecordHeartbeat(ctx, []byte(strconv.Itoa(i)))
		}
		return nil
	}
	startWorker(t, dialRecorded(t, addr, rec), "hb", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(singleActivity("Burst", workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute, HeartbeatTimeout: 10 * time.Second,
		}), "BurstFlow")
		w.RegisterActivityWithName(burst, "Burst")
	})
	ctx := testCtx(t)
	run, err := c.Start(ctx, "BurstFlow", nil, client.StartOptions{TaskQueue: "hb"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// 50 calls within one 8 s throttle interval: at most one goes out at
	// once, and the last is sent before the completion.
	got := rec.snapshot()
	n := len(got)
	if n < 2 || n > 3 || got[n-1] != "complete" || got[n-2] != "heartbeat 50" {
		t.Fatalf("calls = %q, want at most 2 heartbeats, the last with 50, then complete", got)
	}
}

func TestStaleLeaseOnHeartbeatCancelsTheActivity(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	rec := &recorder{}
	rec.staleNext.Store(true)
	var cause atomic.Value
	watchful := func(ctx context.Context) error {
		if activity.Attempt(ctx) > 1 {
			return nil
		}
		activity.RecordHeartbeat(ctx, []byte("x"))
		<-ctx.Done()
		cause.Store(context.Cause(ctx))
		return ctx.Err()
	}
	startWorker(t, dialRecorded(t, addr, rec), "stale", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(singleActivity("Watchful", workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute, HeartbeatTimeout: 10 * time.Second,
			RetryPolicy: &workflow.RetryPolicy{InitialInterval: 10 * time.Millisecond},
		}), "StaleFlow")
		w.RegisterActivityWithName(watchful, "Watchful")
	})
	ctx := testCtx(t)
	run, err := c.Start(ctx, "StaleFlow", nil, client.StartOptions{TaskQueue: "stale"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err, _ := cause.Load().(error); !errors.Is(err, worker.ErrLeaseLost) {
		t.Fatalf("activity context cause = %v, want ErrLeaseLost", err)
	}
}
