package bench

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
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
// away cost a daemon that restarts over them. It builds the state with
// buildWaiting (in this process, on-disk Badger, fsync on): -waiting.n
// activities, a thousand per workflow, each with a schedule-to-close budget
// of a day, whose first attempt timed out into a 3 h backoff. Then it
// closes the engine and the store, opens them again, and reports
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
// 100,000 take one to two minutes to build on two busy cores, a million
// 10–25 minutes (hence -timeout); the restart itself takes well under a
// second.
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
	fill := buildWaiting(b, eng, "waiting", "waiting", n)
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
	began := time.Now()
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

// buildWaiting leaves n activities of queue waiting on retry timers
// waitingBackoff away, through eng in this process (no RPCs), as a daemon
// under a crowd of workers that lost their tasks would: workflows on
// queue+"-wf", named prefix-0, prefix-1, …, schedule a thousand activities
// each (start-to-close 1 s, schedule-to-close a day, retries 3 h apart, up
// to 5 attempts); polls lease them all and drop them, and the engine's
// timers time the leases out into the backoff, a batch of them a
// transaction. It returns how long that took. The state is the engine's
// own, written by its transitions; only the speed of building it is the
// benchmark's.
func buildWaiting(tb testing.TB, eng *engine.Engine, queue, prefix string, n int) time.Duration {
	began := time.Now()
	ctx := context.Background()
	opts := &durablev1.ActivityOptions{
		TaskQueue:              queue,
		StartToCloseTimeout:    durationpb.New(time.Second),
		ScheduleToCloseTimeout: durationpb.New(24 * time.Hour),
		RetryPolicy:            &durablev1.RetryPolicy{InitialMs: waitingBackoff.Milliseconds(), MaxIntervalMs: waitingBackoff.Milliseconds(), MaxAttempts: 5},
	}
	size := map[string]int{} // workflow id → activities it schedules
	var ids []string
	for w := 0; w*perWorkflowMax < n; w++ {
		id := fmt.Sprintf("%s-%d", prefix, w)
		ids = append(ids, id)
		size[id] = min(perWorkflowMax, n-w*perWorkflowMax)
	}
	errs := make(chan error, 16)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
		cancel()
	}
	// The polls lease as they are scheduled and stop at the last one.
	var leased atomic.Int64
	var polls sync.WaitGroup
	for range 4 {
		polls.Go(func() {
			for leased.Load() < int64(n) && pctx.Err() == nil {
				r, err := eng.PollActivityTask(pctx, &durablev1.PollActivityTaskRequest{TaskQueue: queue, Identity: "bench-waiting", MaxTasks: 256})
				if err != nil {
					fail(err)
					return
				}
				if leased.Add(int64(len(r.GetTasks()))) >= int64(n) {
					cancel()
				}
			}
		})
	}
	next := make(chan string)
	var schedulers sync.WaitGroup
	for range 4 {
		schedulers.Go(func() {
			for id := range next {
				if _, err := eng.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "Wait", TaskQueue: queue + "-wf"}); err != nil {
					fail(err)
					continue
				}
				// The task may be another goroutine's workflow's.
				wt, err := eng.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: queue + "-wf", Identity: "bench"})
				if err != nil || len(wt.GetTaskToken()) == 0 {
					fail(fmt.Errorf("workflow task: %d bytes of token, %v", len(wt.GetTaskToken()), err))
					continue
				}
				cmds := make([]*durablev1.Command, size[wt.GetWorkflowId()])
				for i := range cmds {
					cmds[i] = &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY,
						ActivityId: strconv.Itoa(i), ActivityType: "Wait", ActivityOptions: opts}
				}
				if _, err := eng.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Identity: "bench", Commands: cmds}); err != nil {
					fail(err)
				}
			}
		})
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	schedulers.Wait()
	polls.Wait()
	select {
	case err := <-errs:
		tb.Fatal(err)
	default:
	}
	for last := time.Now(); ; {
		q := engineBacklog(tb, eng, queue)
		if q.GetLater() == int64(n) && q.GetReady() == 0 {
			break
		}
		if time.Since(last) > 30*time.Second {
			tb.Logf("waiting state: %d of %d waiting after %s", q.GetLater(), n, time.Since(began).Round(time.Second))
			last = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(began)
}

// engineBacklog is the activity backlog of queue as eng shows it.
func engineBacklog(tb testing.TB, eng *engine.Engine, queue string) *durablev1.TaskBacklog {
	r, err := eng.ListTaskQueues(context.Background(), &durablev1.ListTaskQueuesRequest{TaskQueue: queue})
	if err != nil {
		tb.Fatal(err)
	}
	for _, q := range r.GetTaskQueues() {
		if q.GetName() == queue {
			return q.GetActivityTasks()
		}
	}
	return &durablev1.TaskBacklog{}
}

// BenchmarkWaitingThroughput is BenchmarkActivityThroughput/Succeed (raw
// protocol, worker in its own process, 32 in flight) on a daemon with
// nothing waiting and on one where -late.waiting activities (a million)
// wait on retry timers 3 h away on another queue: the cost of the
// activities that run must not grow with those that wait. Both daemons
// live as long as the test binary (they are BenchmarkRetryLateness's) and
// every run adds its workflows to the same store. -count runs one case
// its count of times, then the other: to measure pairs under the same
// load, run the binary once per pair with -late.dir, which builds the
// million once (minutes; the log says how long; -short skips it) and
// opens it again in every later run for two hours, after which it builds
// it again (stillWaiting: by then its retries are about to fall due). A
// run changes the state it opens (its workflows stay, and compactions
// rewrite the tables): copy the directory before each run to compare
// binaries over the same state.
//
//	go test -c -o bench.test ./internal/bench && cd internal/bench
//	for i in 1 2 3 4 5; do ../../bench.test -test.run '^$' -test.bench WaitingThroughput -test.benchtime 20000x -test.timeout 60m -late.dir /var/tmp/durable-waiting; done
func BenchmarkWaitingThroughput(b *testing.B) {
	for _, waiting := range []int{0, *lateWaiting} {
		b.Run(fmt.Sprintf("Waiting=%d", waiting), func(b *testing.B) {
			if waiting > 0 && testing.Short() {
				b.Skip("-short: building the waiting activities takes minutes")
			}
			b.StopTimer()
			d := sharedDaemon(b, waiting)
			b.StartTimer()
			runThroughput(b, d, setup{}, fmt.Sprintf("bench-%s-%d", binaryID, runSeq.Add(1)))
		})
	}
}

// BenchmarkWaitingWatch opens a Watch stream over gRPC on the daemons of
// BenchmarkWaitingThroughput (nothing waiting, -late.waiting waiting) and
// reports what its snapshot costs: first-event-ms (until the first event
// arrives), snapshot-ms (until SNAPSHOT_DONE), snapshot-MB (the encoded
// size of the snapshot events) and the activities in it; and what it costs
// the daemon's memory (the daemon runs in this process, the reader only
// sizes each event and drops it): heap-before-MB (the live heap after a GC
// before the Watch opens), live-heap-peak-MB (the most the collections
// during the snapshot found live, sampled every 10 ms), rss-before-MB and
// rss-peak-MB (VmHWM, reset before the Watch opens).
//
//	go test -run '^$' -bench WaitingWatch -benchtime 1x -count 3 -timeout 60m ./internal/bench
func BenchmarkWaitingWatch(b *testing.B) {
	for _, waiting := range []int{0, *lateWaiting} {
		b.Run(fmt.Sprintf("Waiting=%d", waiting), func(b *testing.B) {
			if waiting > 0 && testing.Short() {
				b.Skip("-short: building the waiting activities takes minutes")
			}
			b.StopTimer()
			d := sharedDaemon(b, waiting)
			cl, err := d.dial("reader")
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			var first, done []time.Duration
			var size, acts int
			var heapBefore, heapPeak, rssBefore, rssPeak uint64
			for range b.N {
				ctx, cancel := context.WithCancel(context.Background())
				heapBefore, rssBefore = liveHeapAndRSS()
				peak := sampleLiveHeap(10 * time.Millisecond)
				b.StartTimer()
				began := time.Now()
				stream, err := cl.Service().Watch(ctx, &durablev1.WatchRequest{}, grpc.MaxCallRecvMsgSize(1<<30))
				if err != nil {
					b.Fatal(err)
				}
				size, acts = 0, 0
				for {
					ev, err := stream.Recv()
					if err != nil {
						b.Fatal(err)
					}
					if size == 0 {
						first = append(first, time.Since(began))
					}
					size += proto.Size(ev)
					acts += len(ev.GetActivities())
					if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
						break
					}
				}
				done = append(done, time.Since(began))
				b.StopTimer()
				heapPeak, rssPeak = peak(), peakRSS()
				cancel()
			}
			slices.Sort(first)
			slices.Sort(done)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(first[len(first)/2].Microseconds())/1e3, "first-event-ms")
			b.ReportMetric(float64(done[len(done)/2].Microseconds())/1e3, "snapshot-ms")
			b.ReportMetric(float64(size)/1e6, "snapshot-MB")
			b.ReportMetric(float64(acts), "activities")
			b.ReportMetric(float64(heapBefore)/1e6, "heap-before-MB")
			b.ReportMetric(float64(heapPeak)/1e6, "live-heap-peak-MB")
			b.ReportMetric(float64(rssBefore)/1e6, "rss-before-MB")
			b.ReportMetric(float64(rssPeak)/1e6, "rss-peak-MB")
		})
	}
}

// liveHeapAndRSS returns the live heap after a collection and this
// process's resident set after the heap's free pages went back to the
// system, and resets the process's peak resident set (VmHWM) to it.
func liveHeapAndRSS() (heap, rss uint64) {
	debug.FreeOSMemory()
	heap = liveHeap()
	// Writing 5 to clear_refs resets VmHWM to the current resident set.
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	return heap, selfRSS()
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sampleLiveHeap reads liveHeap every interval until the returned
// function is called, which stops it and returns the largest reading.
func sampleLiveHeap(every time.Duration) func() uint64 {
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		peak := liveHeap()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				peak = max(peak, liveHeap())
			case <-stop:
				done <- max(peak, liveHeap())
				return
			}
		}
	}()
	return func() uint64 {
		close(stop)
		return <-done
	}
}

// peakRSS is this process's VmHWM.
func peakRSS() uint64 {
	st, err := readStatus(os.Getpid())
	if err != nil {
		return 0
	}
	return uint64(st.hwm)
}
