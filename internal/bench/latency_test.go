package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// BenchmarkActivityLatency measures one activity end to end, one at a time,
// and reports the median, p90, p99 and highest of b.N, in ms.
//
// Protocol: a daemon (engine, on-disk Badger, fsync on) in this process, a
// worker parked on its activity queue and a driver that is the workflow's
// worker, both speaking the raw protocol over gRPC. Each activity belongs to
// a workflow of its own (so that the history a workflow task carries stays
// the same size); the figure is from the driver's CompleteWorkflowTask that
// schedules it, through the worker's poll and CompleteActivityTask, to the
// driver's PollWorkflowTask returning the task that holds its completion:
// schedule → complete → the workflow sees it.
//
// SDK: the real durabled, the SDK worker of BenchmarkSDKThroughput in a
// process of its own and a workflow function that runs activities one after
// another (20 to a workflow); the figure is the time between the starts of
// two consecutive activities, as the activity reads the clock: complete →
// the workflow sees it (a workflow task, its replay) → the next one
// scheduled → handed out. It is the same round as Protocol's, entered at
// another point, with the SDK's own work in it.
//
// ProtocolDaemon is Protocol against the real durabled in a process of its
// own, as SDK runs it: what the SDK adds is SDK's figure less this one.
//
// All report cpu-µs/activity, the CPU time of every process taking
// part (for SDK the daemon's, the worker's and the driver's; worker-cpu-µs
// is the worker's share): one activity at a time, nearly all of it is on
// the round's path, and unlike the wall clock it hardly moves with what else
// the machine runs.
//
//	go test -run '^$' -bench ActivityLatency -benchtime 2000x -count 5 ./internal/bench
func BenchmarkActivityLatency(b *testing.B) {
	b.Run("Protocol", func(b *testing.B) { benchLatencyProtocol(b, false) })
	b.Run("ProtocolDaemon", func(b *testing.B) { benchLatencyProtocol(b, true) })
	b.Run("SDK", benchLatencySDK)
}

// benchLatencyProtocol is Protocol, or with daemon ProtocolDaemon: the same
// round against the real durabled in a process of its own, as SDK runs it,
// which is the figure to subtract from SDK's for what the SDK adds.
func benchLatencyProtocol(b *testing.B, daemon bool) {
	var cl *client.Client
	var err error
	daemonPID := 0
	if daemon {
		d := testdaemon.Exec(b, b.TempDir())
		daemonPID = d.Pid()
		cl, err = client.New(d.Addr)
	} else {
		cl, err = startDaemon(b, setup{}).dial("worker")
	}
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	c := cl.Service()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		for ctx.Err() == nil {
			r, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "latency", Identity: "bench"})
			if err != nil {
				return
			}
			for _, t := range r.GetTasks() {
				c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: t.GetTaskToken(), Result: []byte("1")})
			}
		}
	})
	waitForPollers(b, c, "latency", durablev1.TaskKind_TASK_KIND_ACTIVITY)
	schedule := []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Work",
		ActivityOptions: &durablev1.ActivityOptions{TaskQueue: "latency", StartToCloseTimeout: durationpb.New(time.Minute)},
	}}
	complete := []*durablev1.Command{{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW}}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpuStart := cpuClock{workerPID: daemonPID}.now()
	for i := range b.N {
		// Starting the workflow and taking its first task also gives the
		// worker, back from the last activity, time to park again.
		id := fmt.Sprintf("latency-%d", i)
		if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "Latency", TaskQueue: "latency-wf"}); err != nil {
			b.Fatal(err)
		}
		wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "latency-wf", Identity: "bench"})
		if err != nil || wt.GetWorkflowId() != id {
			b.Fatalf("first workflow task of %s: %v", id, err)
		}
		began := time.Now()
		if _, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Identity: "bench", Commands: schedule}); err != nil {
			b.Fatal(err)
		}
		wt, err = c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "latency-wf", Identity: "bench"})
		took = append(took, time.Since(began))
		if err != nil || wt.GetWorkflowId() != id || !slices.ContainsFunc(wt.GetHistory(), func(ev *durablev1.HistoryEvent) bool {
			return ev.GetType() == durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED
		}) {
			b.Fatalf("workflow task of %s after its activity: %v", id, err)
		}
		if _, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Identity: "bench", Commands: complete}); err != nil {
			b.Fatal(err)
		}
	}
	cpuUsed := cpuClock{workerPID: daemonPID}.now() - cpuStart
	b.StopTimer()
	reportMillis(b, "", took)
	b.ReportMetric(float64(cpuUsed.Microseconds())/float64(b.N), "cpu-µs/activity")
}

func benchLatencySDK(b *testing.B) {
	const perWorkflow = 20
	d := testdaemon.Exec(b, b.TempDir())
	workerPID := startSDKWorker(b, d.Addr)
	c, err := client.New(d.Addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	waitForPollers(b, c.Service(), sdkQueue, durablev1.TaskKind_TASK_KIND_WORKFLOW, durablev1.TaskKind_TASK_KIND_ACTIVITY)
	var gaps []time.Duration
	activities := 0
	b.ResetTimer()
	daemonStart, workerStart, selfStart := procCPU(d.Pid()), procCPU(workerPID), cpuClock{}.now()
	// A workflow of n activities gives n-1 gaps: b.N gaps take b.N plus a
	// workflow's worth of activities.
	for i := 0; len(gaps) < b.N; i++ {
		n := min(b.N-len(gaps), perWorkflow-1) + 1
		run, err := c.Start(ctx, "Sequence", n, client.StartOptions{ID: fmt.Sprintf("sequence-%d", i), TaskQueue: sdkQueue})
		if err != nil {
			b.Fatal(err)
		}
		var started []int64
		if err := run.Get(ctx, &started); err != nil {
			b.Fatal(err)
		}
		if len(started) != n {
			b.Fatalf("workflow %s ran %d activities, want %d", run.ID, len(started), n)
		}
		activities += n
		for j := 1; j < n; j++ {
			gaps = append(gaps, time.Duration(started[j]-started[j-1]))
		}
	}
	daemonUsed, workerUsed, selfUsed := procCPU(d.Pid())-daemonStart, procCPU(workerPID)-workerStart, cpuClock{}.now()-selfStart
	b.StopTimer()
	reportMillis(b, "", gaps)
	perActivity := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(activities) }
	b.ReportMetric(perActivity(daemonUsed+workerUsed+selfUsed), "cpu-µs/activity")
	b.ReportMetric(perActivity(workerUsed), "worker-cpu-µs/activity")
}

// reportMillis reports the median, p90, p99 and highest of ds in ms, as
// name+"p50-ms" and so on.
func reportMillis(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		b.Fatalf("no %s figures", name)
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	b.ReportMetric(ms(ds[len(ds)/2]), name+"p50-ms")
	b.ReportMetric(ms(ds[len(ds)*9/10]), name+"p90-ms")
	b.ReportMetric(ms(ds[len(ds)*99/100]), name+"p99-ms")
	b.ReportMetric(ms(ds[len(ds)-1]), name+"max-ms")
}
