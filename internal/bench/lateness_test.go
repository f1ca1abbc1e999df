package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The load of BenchmarkRetryLateness; pass others after -args.
var (
	lateRetries = flag.Int("late.retries", 10_000, "retries each run of BenchmarkRetryLateness measures")
	lateRate    = flag.Float64("late.rate", 200, "retries a second that fall due in BenchmarkRetryLateness")
	lateBackoff = flag.Duration("late.backoff", 100*time.Millisecond, "the backoff of the retries BenchmarkRetryLateness measures")
	lateWaiting = flag.Int("late.waiting", 1_000_000, "activities waiting on retry timers hours away in BenchmarkRetryLateness's second case")
	lateDir     = flag.String("late.dir", "", "directory that keeps the waiting state of BenchmarkRetryLateness and BenchmarkWaitingThroughput between test binaries (built there once)")
)

const (
	latePollers    = 8      // parked polls the retries are handed to
	lateQueue      = "late" // the queue of the measured retries and of the waiting activities
	waitingBackoff = 3 * time.Hour
	// perWorkflowMax is the most activities one workflow task schedules
	// (the daemon's bound on commands).
	perWorkflowMax = 1000
)

// BenchmarkRetryLateness measures how late retries are handed out: each run
// fails the first attempts of -late.retries activities (10,000) at
// -late.rate (200 a second) with a retryable failure and a backoff of
// -late.backoff (100 ms), while 8 polls are parked on the queue, and reports
// from the moment each retry fell due to the moment a poll received it: the
// median, p90, p99 and highest, in ms (daemon-* is the daemon's part: from
// due to the lease it recorded as the attempt's start). The due time is the
// one the daemon set: the daemon runs without jitter, so a retry is due
// exactly the backoff after the failure it recorded as the attempt's end
// (TestRetryFallsDueItsBackoffAfterTheFailure checks that).
//
// A run takes about 50 s at the defaults. Waiting=0 runs on an otherwise
// empty daemon (engine, on-disk Badger, fsync on, in this process);
// Waiting=1000000 on one where a million other activities of the same queue
// wait on retry timers 3 h away. Building that state takes minutes (the
// log says how long; see buildWaiting). Each case builds its daemon once
// per test binary, shared with BenchmarkWaitingThroughput, and every run
// (-count, b.N) measures new retries over the same state.
// Each run is one b.N: use -benchtime 1x and -count for repeats. -short
// skips the million; -late.waiting sets another number.
//
//	go test -run '^$' -bench 'RetryLateness/Waiting=0$' -benchtime 1x -count 5 ./internal/bench
//	go test -run '^$' -bench 'RetryLateness/Waiting=1000000$' -benchtime 1x -count 5 -timeout 60m ./internal/bench
func BenchmarkRetryLateness(b *testing.B) {
	for _, waiting := range []int{0, *lateWaiting} {
		b.Run(fmt.Sprintf("Waiting=%d", waiting), func(b *testing.B) {
			if waiting > 0 && testing.Short() {
				b.Skip("-short: building the waiting activities takes minutes")
			}
			b.StopTimer() // each run times its own part
			d := sharedDaemon(b, waiting)
			var late, leased []time.Duration
			var cpu time.Duration
			for range b.N {
				l, s, c := retryRun(b, d)
				late, leased = append(late, l...), append(leased, s...)
				cpu += c
			}
			reportMillis(b, "", late)
			reportMillis(b, "daemon-", leased)
			b.ReportMetric(float64(cpu.Microseconds())/float64(len(late)), "cpu-µs/retry")
		})
	}
}

// identity is the jitter step of a daemon whose due times a benchmark must
// know: the plain backoff.
func identity(d time.Duration) time.Duration { return d }

// shared is a daemon several runs of a benchmark measure over.
type shared struct {
	d    *daemon
	stop func()
	dir  string
	keep bool // the directory outlives the test binary (-late.dir)
}

// builtMark is the file in a -late.dir state directory that says the
// state in it is whole.
const builtMark = "bench-waiting-built"

// A -late.dir state is reused only while its retries are still hours
// away. They fall due waitingBackoff after the leases that timed out
// during the build, so from about waitingBackoff after the build began;
// past that the daemon that opens the state loads every one of them into
// its window at start and the queue runs them, and a benchmark measures
// that instead of a million waiting (one reopened four hours after its
// build spent 5 s of CPU loading them at start, a quarter of the
// process's CPU over a 20,000-activity run). maxWaitingBuild bounds
// how long a build takes (10–25 minutes on two busy cores), and
// waitingReuseMargin leaves a run room to end before anything falls due.
const (
	maxWaitingBuild    = 30 * time.Minute
	waitingReuseMargin = 30 * time.Minute
)

// stillWaiting reports whether a state marked built at builtAt still has
// every retry hours away at now.
func stillWaiting(builtAt, now time.Time) bool {
	return now.Before(builtAt.Add(waitingBackoff - maxWaitingBuild - waitingReuseMargin))
}

var (
	sharedMu      sync.Mutex
	sharedDaemons = map[int]*shared{}
	runSeq        atomic.Int64 // names the workflows of each run apart
	// binaryID names apart the workflows of test binaries that share a
	// -late.dir state.
	binaryID = strconv.FormatInt(time.Now().UnixNano(), 36)
)

// sharedDaemon returns the daemon, without jitter, on which waiting
// activities wait on retry timers hours away on lateQueue, building it on
// first use.
func sharedDaemon(b *testing.B, waiting int) *daemon {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if s := sharedDaemons[waiting]; s != nil {
		return s.d
	}
	// With -late.dir, the waiting state is built once into a directory
	// named after its size and opened again by later test binaries (a
	// restart over it), which keep it.
	dir, keep, built := "", false, false
	if *lateDir != "" && waiting > 0 {
		dir, keep = filepath.Join(*lateDir, fmt.Sprintf("waiting-%d", waiting)), true
		mark, err := os.Stat(filepath.Join(dir, builtMark))
		built = err == nil && stillWaiting(mark.ModTime(), time.Now())
		if err == nil && !built {
			b.Logf("the waiting state in %s was built at %s: its retries fall due from about %s on, so it is built again", dir,
				mark.ModTime().Format(time.TimeOnly), mark.ModTime().Add(waitingBackoff-maxWaitingBuild).Format(time.TimeOnly))
		}
		if !built {
			os.RemoveAll(dir) // a build that did not finish, or one too old
		}
	} else {
		var err error
		if dir, err = os.MkdirTemp("", "durable-bench-"); err != nil {
			b.Fatal(err)
		}
	}
	d, stop := openDaemon(b, dir, setup{jitter: identity})
	sharedDaemons[waiting] = &shared{d: d, stop: stop, dir: dir, keep: keep}
	if waiting > 0 && !built {
		took := buildWaiting(b, d.eng, lateQueue, "waiting", waiting)
		b.Logf("waiting state: %d activities waiting on retry timers %s away, built in %s", waiting, waitingBackoff, took.Round(time.Second))
		if keep {
			if err := os.WriteFile(filepath.Join(dir, builtMark), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return d
}

// closeSharedDaemons stops the shared daemons and removes their data.
func closeSharedDaemons() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for k, s := range sharedDaemons {
		s.stop()
		if !s.keep {
			os.RemoveAll(s.dir)
		}
		delete(sharedDaemons, k)
	}
}

// backlog is the activity backlog of queue.
func backlog(b *testing.B, c durablev1.DurableClient, queue string) *durablev1.TaskBacklog {
	r, err := c.ListTaskQueues(context.Background(), &durablev1.ListTaskQueuesRequest{TaskQueue: queue})
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range r.GetTaskQueues() {
		if q.GetName() == queue {
			return q.GetActivityTasks()
		}
	}
	return &durablev1.TaskBacklog{}
}

// scheduleActivities starts workflows named prefix-0, prefix-1, … on
// wfQueue and, as their worker, schedules n activities with opts in them,
// perWorkflowMax to a workflow, four workflows at a time. It returns the
// workflow ids.
func scheduleActivities(b testing.TB, c durablev1.DurableClient, prefix, wfQueue string, n int, opts *durablev1.ActivityOptions) []string {
	ctx := context.Background()
	var ids []string
	size := map[string]int{} // workflow id → activities it schedules
	for w := 0; w*perWorkflowMax < n; w++ {
		id := fmt.Sprintf("%s-%d", prefix, w)
		ids = append(ids, id)
		size[id] = min(perWorkflowMax, n-w*perWorkflowMax)
	}
	next := make(chan int)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for w := range next {
				if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: ids[w], WorkflowType: "Retries", TaskQueue: wfQueue}); err != nil {
					errs <- err
					return
				}
				// The task may be another goroutine's workflow's.
				wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: wfQueue, Identity: "bench"})
				if err != nil {
					errs <- err
					return
				}
				var cmds []*durablev1.Command
				for a := range size[wt.GetWorkflowId()] {
					cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: fmt.Sprint(a), ActivityType: "Retry", ActivityOptions: opts})
				}
				if _, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Identity: "bench", Commands: cmds}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for w := range ids {
		select {
		case next <- w:
		case err := <-errs:
			b.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return ids
}

// receipt is a retry a parked poll received, and when.
type receipt struct {
	workflowID, activityID string
	token                  []byte
	at                     time.Time
}

// retryRun is one run of BenchmarkRetryLateness on d: it schedules
// -late.retries activities, leases their first attempts, parks the polls,
// then fails the attempts at -late.rate (the timed part ends when every
// retry has been received). It returns, for each retry, how late the polls
// received it and how late the daemon leased it, both from its due time,
// and the CPU time this process (daemon and clients) used meanwhile.
func retryRun(b *testing.B, d *daemon) (late, leased []time.Duration, cpu time.Duration) {
	b.StopTimer()
	n, run := *lateRetries, runSeq.Add(1)
	cl, err := d.dial("worker")
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	c := cl.Service()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := &durablev1.ActivityOptions{
		TaskQueue:           lateQueue,
		StartToCloseTimeout: durationpb.New(time.Hour),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: lateBackoff.Milliseconds(), MaxIntervalMs: lateBackoff.Milliseconds(), MaxAttempts: 3},
	}
	ids := scheduleActivities(b, c, fmt.Sprintf("late-%s-%d", binaryID, run), fmt.Sprintf("late-wf-%s-%d", binaryID, run), n, opts)

	// The first attempts, leased before the polls park: these receive
	// retries only.
	var first [][]byte
	for len(first) < n {
		r, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: lateQueue, Identity: "bench", MaxTasks: 100})
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range r.GetTasks() {
			if t.GetAttempt() != 1 {
				b.Fatalf("attempt %d of %s/%s before any failure", t.GetAttempt(), t.GetWorkflowId(), t.GetActivityId())
			}
			first = append(first, t.GetTaskToken())
		}
	}

	got := make(chan receipt, n)
	var polls sync.WaitGroup
	defer polls.Wait()
	defer cancel()
	for p := range latePollers {
		polls.Go(func() {
			for ctx.Err() == nil {
				r, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: lateQueue, Identity: fmt.Sprintf("bench-%d", p), MaxTasks: 1})
				at := time.Now()
				if err != nil {
					return
				}
				for _, t := range r.GetTasks() {
					got <- receipt{workflowID: t.GetWorkflowId(), activityID: t.GetActivityId(), token: t.GetTaskToken(), at: at}
				}
			}
		})
	}
	waitForParked(b, c, lateQueue, latePollers)

	b.StartTimer()
	cpuStart := cpuClock{}.now()
	failures := make(chan []byte)
	var failers sync.WaitGroup
	for range concurrency {
		failers.Go(func() {
			for tok := range failures {
				if _, err := c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: tok, Identity: "bench", Failure: &durablev1.Failure{Type: "Flaky", Message: "first attempt"}}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	start := time.Now()
	for i, tok := range first {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / *lateRate * float64(time.Second)))))
		failures <- tok
	}
	close(failures)
	failers.Wait()
	received := map[string]receipt{}
	deadline := time.After(time.Minute + 10*(*lateBackoff))
	for len(received) < n {
		select {
		case r := <-got:
			received[r.workflowID+"/"+r.activityID] = r
		case <-deadline:
			b.Fatalf("%d of %d retries received a minute after the last failure", len(received), n)
		}
	}
	b.StopTimer()
	cpu = cpuClock{}.now() - cpuStart
	cancel()
	polls.Wait()

	// The due times, from the attempt trail the daemon kept.
	ctx = context.Background()
	for _, id := range ids {
		desc, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: id})
		if err != nil {
			b.Fatal(err)
		}
		for _, a := range desc.GetPendingActivities() {
			r, ok := received[a.GetWorkflowId()+"/"+a.GetActivityId()]
			trail := a.GetAttempts()
			if !ok || len(trail) != 2 {
				b.Fatalf("%s/%s: received %v, %d attempts", a.GetWorkflowId(), a.GetActivityId(), ok, len(trail))
			}
			due := trail[0].GetEndedTime().AsTime().Add(activity.Backoff(a.GetOptionsInForce().GetRetryPolicy(), 1))
			late = append(late, r.at.Sub(due))
			leased = append(leased, trail[1].GetStartedTime().AsTime().Sub(due))
		}
	}
	if len(late) != n {
		b.Fatalf("found %d retries in the workflows, want %d", len(late), n)
	}

	// The retries are left complete, so that nothing of this run waits
	// in the next.
	done := make(chan []byte)
	var completers sync.WaitGroup
	for range concurrency {
		completers.Go(func() {
			for tok := range done {
				if _, err := c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: tok, Identity: "bench"}); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, r := range received {
		done <- r.token
	}
	close(done)
	completers.Wait()
	return late, leased, cpu
}

// waitForParked waits until n polls of distinct identities are parked on
// queue's activities.
func waitForParked(b *testing.B, c durablev1.DurableClient, queue string, n int) {
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := c.ListTaskQueues(context.Background(), &durablev1.ListTaskQueuesRequest{TaskQueue: queue})
		if err != nil {
			b.Fatal(err)
		}
		parked := 0
		for _, q := range r.GetTaskQueues() {
			for _, p := range q.GetPollers() {
				if p.GetParked() && p.GetKind() == durablev1.TaskKind_TASK_KIND_ACTIVITY {
					parked++
				}
			}
		}
		if parked >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d polls parked on %s after a minute", parked, n, queue)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWaitingStateIsReusedOnlyWhileItsRetriesAreHoursAway: a built state is
// opened again for two hours after its build, and built again after that.
func TestWaitingStateIsReusedOnlyWhileItsRetriesAreHoursAway(t *testing.T) {
	built := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		after time.Duration
		want  bool
	}{
		{0, true},
		{time.Hour, true},
		{2*time.Hour - time.Second, true},
		{2 * time.Hour, false},
		{4 * time.Hour, false},
	} {
		if got := stillWaiting(built, built.Add(c.after)); got != c.want {
			t.Errorf("a state built %s ago: reused %v, want %v", c.after, got, c.want)
		}
	}
}

// TestRetryFallsDueItsBackoffAfterTheFailure checks what
// BenchmarkRetryLateness takes a retry's due time to be: on a daemon without
// jitter, the retry is due exactly the backoff after the end of the failed
// attempt as its trail records it.
func TestRetryFallsDueItsBackoffAfterTheFailure(t *testing.T) {
	d, stop := openDaemon(t, t.TempDir(), setup{jitter: identity})
	t.Cleanup(stop)
	cl, err := d.dial("worker")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c, ctx := cl.Service(), context.Background()
	ids := scheduleActivities(t, c, "due", "due-wf", 1, &durablev1.ActivityOptions{
		TaskQueue:           lateQueue,
		StartToCloseTimeout: durationpb.New(time.Minute),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 3_600_000, MaxIntervalMs: 3_600_000},
	})
	r, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: lateQueue, Identity: "test"})
	if err != nil || len(r.GetTasks()) != 1 {
		t.Fatalf("poll: %d tasks, %v", len(r.GetTasks()), err)
	}
	if _, err := c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: r.GetTasks()[0].GetTaskToken(), Failure: &durablev1.Failure{Type: "Flaky"}}); err != nil {
		t.Fatal(err)
	}
	desc, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: ids[0]})
	if err != nil || len(desc.GetPendingActivities()) != 1 {
		t.Fatalf("describe: %v", err)
	}
	a := desc.GetPendingActivities()[0]
	ended := a.GetAttempts()[0].GetEndedTime().AsTime()
	want := ended.Add(activity.Backoff(a.GetOptionsInForce().GetRetryPolicy(), 1))
	if got := a.GetNextAttemptTime().AsTime(); !got.Equal(want) || want.Sub(ended) != time.Hour {
		t.Errorf("the retry is due at %s, %s after the failure; want %s, an hour after it", got, got.Sub(ended), want)
	}
}
