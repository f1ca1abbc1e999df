package bench

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

var (
	waitingN       = flag.Int("waiting.n", 100_000, "activities BenchmarkWaitingWork leaves waiting on a retry hours away")
	waitingProfile = flag.String("waiting.heapprofile", "", "file BenchmarkWaitingWork writes the heap profile after the restart to (and with .run added, before it)")
)

// BenchmarkWaitingWork measures what activities waiting on a retry hours
// away cost a daemon that restarts over them. It builds the state through
// the engine, as the server drives it (in this process, on-disk Badger,
// fsync on): -waiting.n activities, a thousand per workflow, each with a
// schedule-to-close budget of a day, whose first attempt fails into a 3 h
// backoff. Then it closes the engine and the store, opens them again, and
// reports
//
//   - start-ms: from opening the store to the first poll answered;
//   - heap-B/waiting: the Go heap in use after a GC, over what it was before
//     the store was opened, per waiting activity;
//   - rss-B/waiting: the same for this process's resident set (after the
//     heap's free pages are returned to the system), which counts Badger's
//     caches and memtables as well as the heap;
//   - run-heap-B/waiting: the same for the heap before the restart, with
//     the engine that built the state still open;
//   - fill-s: how long building the state took.
//
// 100,000 take 35–90 s to build on two busy cores, a million 12–15 minutes
// (hence -timeout); the restart itself takes well under a second.
//
//	go test -run '^$' -bench WaitingWork -benchtime 1x ./internal/bench
//	go test -run '^$' -bench WaitingWork -benchtime 1x -timeout 60m ./internal/bench -args -waiting.n=1000000
func BenchmarkWaitingWork(b *testing.B) {
	for range b.N {
		waitingRun(b, *waitingN)
	}
}

func waitingRun(b *testing.B, n int) {
	b.StopTimer()
	dir := b.TempDir()
	logger := slog.New(slog.DiscardHandler)
	heapBase, _ := settledMemory()
	st, err := badgerstore.Open(dir, badgerstore.Options{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	// No jitter while filling: every retry is due the full 3 h later.
	eng, err := engine.New(st, engine.Options{Logger: logger, Jitter: func(d time.Duration) time.Duration { return d }})
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	fillWaiting(b, eng, n)
	fill := time.Since(began)
	heapRun, _ := settledMemory()
	writeHeapProfile(b, ".run")
	if err := eng.Close(); err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	eng, st = nil, nil

	heap0, rss0 := settledMemory()
	b.StartTimer()
	began = time.Now()
	st, err = badgerstore.Open(dir, badgerstore.Options{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	eng, err = engine.New(st, engine.Options{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	// A poll whose context is done looks once and answers.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err := eng.PollActivityTask(done, &durablev1.PollActivityTaskRequest{TaskQueue: "waiting", Identity: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Since(began)
	b.StopTimer()
	if len(resp.GetTasks()) > 0 {
		b.Fatalf("a poll got %d tasks; every activity should wait hours", len(resp.GetTasks()))
	}
	qs, err := eng.ListTaskQueues(context.Background(), &durablev1.ListTaskQueuesRequest{TaskQueue: "waiting"})
	if err != nil {
		b.Fatal(err)
	}
	if got := qs.GetTaskQueues()[0].GetActivityTasks().GetLater(); got != int64(n) {
		b.Fatalf("the queue shows %d tasks later, want %d", got, n)
	}
	heap1, rss1 := settledMemory()
	writeHeapProfile(b, "")
	runtime.KeepAlive(eng)
	eng.Close()
	st.Close()

	per := func(a, b0 uint64) float64 { return (float64(a) - float64(b0)) / float64(n) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(start.Microseconds())/1e3, "start-ms")
	b.ReportMetric(per(heap1, heap0), "heap-B/waiting")
	b.ReportMetric(per(rss1, rss0), "rss-B/waiting")
	b.ReportMetric(per(heapRun, heapBase), "run-heap-B/waiting")
	b.ReportMetric(fill.Seconds(), "fill-s")
	b.Logf("%d waiting: start %s, heap %.1f → %.1f MB, RSS %.1f → %.1f MB, built in %s",
		n, start.Round(time.Millisecond), mb(int64(heap0)), mb(int64(heap1)), mb(int64(rss0)), mb(int64(rss1)), fill.Round(time.Second))
}

// writeHeapProfile writes the heap profile to -waiting.heapprofile with
// suffix added to its name, if the flag is set.
func writeHeapProfile(b *testing.B, suffix string) {
	if *waitingProfile == "" {
		return
	}
	f, err := os.Create(*waitingProfile + suffix)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// settledMemory is the Go heap in use after a GC and the process's resident
// set once the heap's free pages went back to the system.
func settledMemory() (heap, rss uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, selfRSS()
}

func selfRSS() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// fillWaiting leaves n activities on queue "waiting" retrying in 3 h: it
// starts workflows that schedule a thousand each, then polls every first
// attempt and fails it.
func fillWaiting(tb testing.TB, eng *engine.Engine, n int) {
	const perWorkflow = 1000
	ctx := context.Background()
	opts := &durablev1.ActivityOptions{
		TaskQueue:              "waiting",
		StartToCloseTimeout:    durationpb.New(time.Minute),
		ScheduleToCloseTimeout: durationpb.New(24 * time.Hour),
		RetryPolicy:            &durablev1.RetryPolicy{InitialMs: (3 * time.Hour).Milliseconds(), MaxIntervalMs: (3 * time.Hour).Milliseconds(), MaxAttempts: 5},
	}
	var scheduled atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w*perWorkflow < n; w++ {
		id := fmt.Sprintf("waiting-%05d", w)
		if _, err := eng.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "Wait", TaskQueue: "waiting-wf"}); err != nil {
			tb.Fatal(err)
		}
		wt, err := eng.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "waiting-wf", Identity: "bench"})
		if err != nil || len(wt.GetTaskToken()) == 0 {
			tb.Fatalf("workflow task of %s: %v", id, err)
		}
		var cmds []*durablev1.Command
		for i := range min(perWorkflow, n-w*perWorkflow) {
			cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY,
				ActivityId: strconv.Itoa(i), ActivityType: "Wait", ActivityOptions: opts})
		}
		if _, err := eng.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
			tb.Fatal(err)
		}
		scheduled.Add(int64(len(cmds)))
	}
	var failed atomic.Int64
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range concurrency {
		wg.Go(func() {
			for failed.Load() < int64(n) && pctx.Err() == nil {
				r, err := eng.PollActivityTask(pctx, &durablev1.PollActivityTaskRequest{TaskQueue: "waiting", Identity: "bench", MaxTasks: 64})
				if err != nil {
					errs <- err
					cancel()
					return
				}
				for _, t := range r.GetTasks() {
					_, err := eng.FailActivityTask(pctx, &durablev1.FailActivityRequest{TaskToken: t.GetTaskToken(), Identity: "bench",
						Failure: &durablev1.Failure{Type: "Unavailable", Message: "try again later"}})
					if err != nil {
						errs <- err
						cancel()
						return
					}
					if failed.Add(1) == int64(n) {
						cancel() // the pollers still parked stop
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	if got := failed.Load(); got != int64(n) || scheduled.Load() != int64(n) {
		tb.Fatalf("failed %d first attempts, want %d", got, n)
	}
}
