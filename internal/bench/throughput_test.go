// Package bench measures durable end to end: a daemon (engine, on-disk Badger,
// gRPC) in the test process and a worker in a process of its own that speaks
// the raw protocol, so the figure is the engine's, not an SDK's.
//
//	go test -run '^$' -bench ActivityThroughput -benchtime 20000x ./internal/bench
package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

const (
	envWorker       = "DURABLE_BENCH_WORKER"    // the daemon's address: run as the worker
	envFailOnce     = "DURABLE_BENCH_FAIL_ONCE" // "1": every first attempt fails
	concurrency     = 32                        // activities running at once in the worker
	pollBatch       = 8                         // tasks one activity poll may carry
	workflowPollers = 16                        // workflow task pollers in the worker
	perWorkflow     = 50                        // activities each workflow fans out
	taskQueue       = "bench"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(envWorker); addr != "" {
		if err := runWorker(addr, os.Getenv(envFailOnce) == "1"); err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// BenchmarkActivityThroughput runs b.N activities through schedule → poll →
// complete, 32 at a time, and reports activities per second. FailOnce makes
// every activity fail its first attempt and succeed on the retry.
func BenchmarkActivityThroughput(b *testing.B) {
	b.Run("Succeed", func(b *testing.B) { benchThroughput(b, false) })
	b.Run("FailOnce", func(b *testing.B) { benchThroughput(b, true) })
}

func benchThroughput(b *testing.B, failOnce bool) {
	addr := startDaemon(b)
	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(os.Environ(), envWorker+"="+addr, envFailOnce+"="+map[bool]string{true: "1", false: "0"}[failOnce])
	worker.Stderr = os.Stderr
	if err := worker.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		worker.Process.Kill()
		worker.Wait()
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	c := durablev1.NewDurableClient(conn)
	ctx := context.Background()

	var ids []string
	b.ResetTimer()
	start := time.Now()
	for left := b.N; left > 0; left -= perWorkflow {
		n := min(left, perWorkflow)
		id := fmt.Sprintf("bench-%d", len(ids))
		ids = append(ids, id)
		if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "FanOut", TaskQueue: taskQueue, Input: []byte(strconv.Itoa(n))}); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids {
		for {
			d, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: id, WaitForClose: true})
			if err != nil {
				b.Fatal(err)
			}
			if s := d.GetWorkflow().GetStatus(); s == durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED {
				break
			} else if s != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
				b.Fatalf("workflow %s ended %v", id, s)
			}
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "activities/s")
}

// startDaemon serves an engine over an on-disk store, durable by default.
func startDaemon(b *testing.B) string {
	st, err := badgerstore.Open(b.TempDir(), badgerstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	eng, err := engine.New(st, engine.Options{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	gs := server.New(eng, server.Options{Logger: logger}).NewGRPCServer()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go gs.Serve(l)
	b.Cleanup(func() {
		eng.Close()
		gs.Stop()
		st.Close()
	})
	return l.Addr().String()
}

// runWorker is the worker process: activity pollers that complete (or fail
// once) each task, and workflow pollers that fan out perWorkflow activities
// and complete the workflow when all of them have completed.
func runWorker(addr string, failOnce bool) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	c := durablev1.NewDurableClient(conn)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, concurrency+workflowPollers)
	for range concurrency / pollBatch {
		wg.Go(func() { errs <- activityLoop(ctx, c, failOnce) })
	}
	for range workflowPollers {
		wg.Go(func() { errs <- workflowLoop(ctx, c) })
	}
	return <-errs
}

// activityLoop polls for up to pollBatch tasks and runs them concurrently,
// so concurrency/pollBatch loops keep concurrency activities in flight.
func activityLoop(ctx context.Context, c durablev1.DurableClient, failOnce bool) error {
	for {
		r, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: taskQueue, Identity: "bench", MaxTasks: pollBatch})
		if err != nil {
			return err
		}
		errs := make(chan error, len(r.GetTasks()))
		for _, t := range r.GetTasks() {
			go func() {
				var err error
				if failOnce && t.GetAttempt() == 1 {
					_, err = c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: t.GetTaskToken(), Failure: &durablev1.Failure{Type: "Flaky", Message: "first attempt"}})
				} else {
					_, err = c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: t.GetTaskToken(), Result: []byte("1")})
				}
				errs <- err
			}()
		}
		for range r.GetTasks() {
			if err := <-errs; err != nil {
				return err
			}
		}
	}
}

func workflowLoop(ctx context.Context, c durablev1.DurableClient) error {
	opts := &durablev1.ActivityOptions{
		StartToCloseTimeout: durationpb.New(time.Minute),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 1, MaxIntervalMs: 10},
	}
	for {
		r, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: taskQueue, Identity: "bench"})
		if err != nil {
			return err
		}
		if len(r.GetTaskToken()) == 0 {
			continue
		}
		var want, scheduled, completed int
		for _, ev := range r.GetHistory() {
			switch ev.GetType() {
			case durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				want, _ = strconv.Atoi(string(ev.GetInput()))
			case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				scheduled++
			case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				completed++
			}
		}
		var cmds []*durablev1.Command
		switch {
		case scheduled == 0:
			for i := range want {
				cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: strconv.Itoa(i + 1), ActivityType: "Work", ActivityOptions: opts})
			}
		case completed == want:
			cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW})
		}
		if _, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: r.GetTaskToken(), Identity: "bench", Commands: cmds}); err != nil {
			return err
		}
	}
}
