package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/worker"
	"github.com/tinyllm/durable/workflow"
)

const (
	envSDKWorker = "DURABLE_BENCH_SDK_WORKER" // the daemon's address: run as the SDK worker
	sdkQueue     = "bench-sdk"
)

// BenchmarkSDKThroughput is BenchmarkActivityThroughput written with the
// SDK, as users write it: a workflow function fans out ExecuteActivity calls
// to a no-op activity and waits for every future; a worker.Worker with 32
// activity slots (and as many workflow tasks at once as the raw worker has
// pollers) runs both; the driver starts the workflows with client.Start and
// waits with Run.Get. The daemon (the real durabled, on disk, fsync on), the
// worker and the driver are three processes. The variants differ in the
// fan-out of each workflow; b.N is the activities of a run, as in
// BenchmarkActivityThroughput, so activities/s compares with its figure
// directly. cpu-µs/activity is the CPU time of all three processes (and of
// the PostgreSQL server with -bench.store=postgres, which runs one durabled
// on a database of its own; daemon-cpu-µs and db-cpu-µs are their shares).
//
//	go test -run '^$' -bench SDKThroughput -benchtime 20000x -count 5 ./internal/bench
func BenchmarkSDKThroughput(b *testing.B) {
	for _, fanOut := range []int{50, 500, 1000} {
		b.Run(fmt.Sprintf("FanOut=%d", fanOut), func(b *testing.B) { benchSDKThroughput(b, fanOut) })
	}
}

func benchSDKThroughput(b *testing.B, fanOut int) {
	t := flagTarget(b)
	t.nodes = max(t.nodes, 1) // durabled in processes of their own, whatever the flag
	d := startTarget(b, t, setup{})
	if t.nodes > 1 {
		b.Logf("on %d durabled, each workflow's calls %s", t.nodes, map[bool]string{true: "through the node its id picks", false: "round robin"}[*benchRoute])
	}
	addrs := strings.Join(d.nodeAddrs(), ",")
	workerPID := startSDKWorker(b, addrs)
	c, err := client.New(addrs, sdkBalancing(addrs, *benchRoute)...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var nodes []durablev1.DurableClient
	for _, addr := range d.nodeAddrs() {
		nc, err := client.New(addr)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		nodes = append(nodes, nc.Service())
	}
	waitForPollersOn(b, nodes, sdkQueue, durablev1.TaskKind_TASK_KIND_WORKFLOW, durablev1.TaskKind_TASK_KIND_ACTIVITY)

	var runs []*client.Run
	cpu := d.cpuClock(workerPID)
	b.ResetTimer()
	start, cpuStart := time.Now(), cpu.now()
	for left := b.N; left > 0; left -= fanOut {
		run, err := c.Start(ctx, "FanOut", min(left, fanOut), client.StartOptions{ID: fmt.Sprintf("sdk-%d", len(runs)), TaskQueue: sdkQueue})
		if err != nil {
			b.Fatal(err)
		}
		runs = append(runs, run)
	}
	done := 0
	for _, run := range runs {
		var n int
		if err := run.Get(ctx, &n); err != nil {
			b.Fatal(err)
		}
		done += n
	}
	elapsed, cpuEnd := time.Since(start), cpu.now()
	b.StopTimer()
	if done != b.N {
		b.Fatalf("the workflows ran %d activities, want %d", done, b.N)
	}
	d.report(b, elapsed, cpuEnd.sub(cpuStart))
}

// startSDKWorker runs this test binary as the SDK worker of the daemon at
// addr until the benchmark ends, and returns its process id.
func startSDKWorker(b *testing.B, addr string) int {
	w := exec.Command(os.Args[0], "-test.run=^$")
	w.Env = append(os.Environ(), envSDKWorker+"="+addr, envRoute+"="+map[bool]string{true: "1", false: "0"}[*benchRoute])
	w.Stderr = os.Stderr
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		w.Process.Kill()
		w.Wait()
	})
	return w.Process.Pid
}

// sdkBalancing is the client options of the SDK benchmark's worker and
// driver for addr: with several nodes, the SDK's own balancing (each
// workflow's calls through the node its id picks) with -bench.route, and
// every call round robin without, as SDK clients balanced before they
// routed by workflow.
func sdkBalancing(addr string, route bool) []client.Option {
	if route || !strings.Contains(addr, ",") {
		return nil
	}
	return []client.Option{client.WithDialOptions(grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"round_robin": {}}]}`))}
}

// runSDKWorker is the SDK worker process: it runs until it is killed.
// addr may list several nodes.
func runSDKWorker(addr string) error {
	c, err := client.New(addr, sdkBalancing(addr, os.Getenv(envRoute) == "1")...)
	if err != nil {
		return err
	}
	w := worker.New(c, sdkQueue, worker.Options{
		MaxConcurrentActivities:    concurrency,
		MaxConcurrentWorkflowTasks: workflowPollers,
		Logger:                     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	w.RegisterWorkflowWithName(sdkFanOut, "FanOut")
	w.RegisterWorkflowWithName(sdkSequence, "Sequence")
	w.RegisterActivityWithName(sdkWork, "Work")
	w.RegisterActivityWithName(sdkStamp, "Stamp")
	return w.Run(context.Background())
}

// sdkOptions are the options of the benchmarks' activities, those the raw
// worker schedules with.
var sdkOptions = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute,
	RetryPolicy:         &workflow.RetryPolicy{InitialInterval: time.Millisecond, MaximumInterval: 10 * time.Millisecond},
}

// sdkFanOut schedules n activities at once and returns how many completed.
func sdkFanOut(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, sdkOptions)
	futures := make([]workflow.Future, n)
	for i := range futures {
		futures[i] = workflow.ExecuteActivity(ctx, "Work", nil)
	}
	done := 0
	for _, f := range futures {
		var one int
		if err := f.Get(ctx, &one); err != nil {
			return done, err
		}
		done += one
	}
	return done, nil
}

// sdkWork is the no-op activity.
func sdkWork(context.Context) (int, error) { return 1, nil }

// sdkSequence runs n activities one after another and returns the wall
// clock each of them started at, in Unix nanoseconds.
func sdkSequence(ctx workflow.Context, n int) ([]int64, error) {
	ctx = workflow.WithActivityOptions(ctx, sdkOptions)
	var started []int64
	for range n {
		var at int64
		if err := workflow.ExecuteActivity(ctx, "Stamp", nil).Get(ctx, &at); err != nil {
			return started, err
		}
		started = append(started, at)
	}
	return started, nil
}

// sdkStamp returns the wall clock it started at.
func sdkStamp(context.Context) (int64, error) { return time.Now().UnixNano(), nil }

// waitForPollers waits until a poll of every kind is parked on queue, so
// that a timed run does not count a worker's start. A node lists the
// pollers parked on it: with several nodes, pass a client of each.
func waitForPollers(b *testing.B, c durablev1.DurableClient, queue string, kinds ...durablev1.TaskKind) {
	waitForPollersOn(b, []durablev1.DurableClient{c}, queue, kinds...)
}

func waitForPollersOn(b *testing.B, nodes []durablev1.DurableClient, queue string, kinds ...durablev1.TaskKind) {
	deadline := time.Now().Add(time.Minute)
	for {
		parked := map[durablev1.TaskKind]bool{}
		for _, c := range nodes {
			r, err := c.ListTaskQueues(context.Background(), &durablev1.ListTaskQueuesRequest{TaskQueue: queue})
			if err != nil {
				b.Fatal(err)
			}
			for _, q := range r.GetTaskQueues() {
				for _, p := range q.GetPollers() {
					if p.GetParked() {
						parked[p.GetKind()] = true
					}
				}
			}
		}
		all := true
		for _, k := range kinds {
			all = all && parked[k]
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no poll of every kind of %v parked on %s within a minute", kinds, queue)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
