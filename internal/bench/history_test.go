package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
	"github.com/tinyllm/durable/worker"
	"github.com/tinyllm/durable/workflow"
)

const (
	envHistoryWorker = "DURABLE_BENCH_HISTORY_WORKER" // the daemon's address: run as the SDK worker
	envHistoryCache  = "DURABLE_BENCH_HISTORY_CACHE"  // the worker's MaxCachedWorkflows
	historyQueue     = "bench-history"
)

// BenchmarkWorkflowTaskHistory runs b.N no-op activities through the real
// SDK (a worker process of its own with 32 activity slots, a daemon over
// on-disk Badger with fsync on in this process, workflows started and
// awaited from this process), in workflows that fan out to 50, 500 or 1,000
// activities each, with the worker's workflow cache on (Sticky: tasks carry
// only new events) and off (Whole: every task carries the whole history, as
// before); StickyTwoWorkers runs two worker processes with their caches on,
// which take a workflow's tasks in turn as they happen to poll. Besides
// activities/s and CPU per activity (all processes) it reports what the
// workflow tasks cost on the wire, which CPU contention does not move:
// events and bytes per task, the share of tasks that carried only new
// events, and bytes per activity (the history a worker asked for on a cache
// miss included).
//
//	go test -run '^$' -bench WorkflowTaskHistory -benchtime 20000x -count 5 ./internal/bench
func BenchmarkWorkflowTaskHistory(b *testing.B) {
	for _, n := range []int{50, 500, 1000} {
		for _, v := range []struct {
			name             string
			cache, processes int
		}{{"Sticky", 1000, 1}, {"Whole", -1, 1}, {"StickyTwoWorkers", 1000, 2}} {
			b.Run(fmt.Sprintf("FanOut%d/%s", n, v.name), func(b *testing.B) { benchHistory(b, n, v.cache, v.processes) })
		}
	}
}

// taskWire counts what the daemon sends in workflow tasks.
type taskWire struct {
	tasks, partial, events, bytes, fetched atomic.Int64
}

func (w *taskWire) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	switch r := resp.(type) {
	case *durablev1.PollWorkflowTaskResponse:
		if len(r.GetTaskToken()) > 0 {
			w.tasks.Add(1)
			if r.GetHistoryStartEventId() > 1 {
				w.partial.Add(1)
			}
			w.events.Add(int64(len(r.GetHistory())))
			w.bytes.Add(int64(proto.Size(r)))
		}
	case *durablev1.GetWorkflowHistoryResponse:
		if _, ok := req.(*durablev1.GetWorkflowTaskHistoryRequest); ok {
			w.fetched.Add(int64(proto.Size(r)))
		}
	}
	return resp, err
}

func benchHistory(b *testing.B, fanOut, cache, processes int) {
	wire := &taskWire{}
	addr := startCountingDaemon(b, wire)
	var pids []int
	for range processes {
		w := exec.Command(os.Args[0], "-test.run=^TestHistoryWorkerProcess$")
		w.Env = append(os.Environ(), envHistoryWorker+"="+addr, envHistoryCache+"="+strconv.Itoa(cache))
		w.Stderr = os.Stderr
		if err := w.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			w.Process.Kill()
			w.Wait()
		})
		pids = append(pids, w.Process.Pid)
	}
	c, err := client.New(addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	b.ResetTimer()
	start, cpuStart := time.Now(), cpuOf(pids)
	var runs []*client.Run
	for left := b.N; left > 0; left -= fanOut {
		run, err := c.Start(ctx, "HistoryFanOut", min(left, fanOut), client.StartOptions{ID: fmt.Sprintf("fan-%d", len(runs)), TaskQueue: historyQueue})
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, run)
	}
	for _, run := range runs {
		if err := run.Get(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
	elapsed, cpuUsed := time.Since(start), cpuOf(pids)-cpuStart
	b.StopTimer()
	tasks := max(wire.tasks.Load(), 1)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "activities/s")
	b.ReportMetric(float64(cpuUsed.Microseconds())/float64(b.N), "cpu-µs/activity")
	b.ReportMetric(float64(wire.tasks.Load())/float64(len(runs)), "tasks/workflow")
	b.ReportMetric(float64(wire.partial.Load())/float64(tasks), "partial/task")
	b.ReportMetric(float64(wire.events.Load())/float64(tasks), "events/task")
	b.ReportMetric(float64(wire.bytes.Load())/float64(tasks), "B/task")
	b.ReportMetric(float64(wire.bytes.Load()+wire.fetched.Load())/float64(b.N), "task-B/activity")
}

// cpuOf is the CPU time this process and the worker processes have used.
func cpuOf(pids []int) time.Duration {
	d := cpuClock{}.now()
	for _, pid := range pids {
		d += procCPU(pid)
	}
	return d
}

// startCountingDaemon serves an engine over an on-disk store, durable by
// default, with wire counting the workflow tasks it sends.
func startCountingDaemon(b *testing.B, wire *taskWire) string {
	st, err := badgerstore.Open(b.TempDir(), badgerstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	eng, err := engine.New(st, engine.Options{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	gs := server.New(eng, server.Options{Logger: logger}).NewGRPCServer(grpc.ChainUnaryInterceptor(wire.intercept))
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

// HistoryFanOut schedules n no-op activities at once and waits for all.
func HistoryFanOut(ctx workflow.Context, n int) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &workflow.RetryPolicy{InitialInterval: time.Millisecond, MaximumInterval: 10 * time.Millisecond},
	})
	fs := make([]workflow.Future, n)
	for i := range fs {
		fs[i] = workflow.ExecuteActivity(ctx, "Work", nil)
	}
	for _, f := range fs {
		if err := f.Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// TestHistoryWorkerProcess is the worker process of
// BenchmarkWorkflowTaskHistory; run on its own it does nothing.
func TestHistoryWorkerProcess(t *testing.T) {
	addr := os.Getenv(envHistoryWorker)
	if addr == "" {
		t.Skip("the worker process of BenchmarkWorkflowTaskHistory")
	}
	cache, _ := strconv.Atoi(os.Getenv(envHistoryCache))
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(c, historyQueue, worker.Options{
		MaxConcurrentActivities: concurrency,
		MaxCachedWorkflows:      cache,
		Logger:                  slog.New(slog.DiscardHandler),
	})
	w.RegisterWorkflow(HistoryFanOut)
	w.RegisterActivityWithName(func(ctx context.Context) error { return nil }, "Work")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
