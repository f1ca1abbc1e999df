package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// BenchmarkHandOff measures how long a task takes to reach a worker that is
// already waiting for it, on a daemon over on-disk Badger with fsync on (in
// this process, over gRPC). Schedule: a workflow task completes with one
// ScheduleActivity and a parked poll receives the activity; the figures are
// from the CompleteWorkflowTask call to the poll's answer (handoff) and the
// daemon's own schedule-to-start wait (started). Retry: the first attempt
// fails with a 2 ms backoff and the parked poll receives the second; the
// figure is how late the daemon handed the retry out after it was due (the
// wait the AttemptStarted metric hears). Both also report the store's syncs
// (sync): what a task queued by a timer, a retry after a lease ran out, waits
// more once it is published after the sync. Each reports the median, p90,
// p99 and the highest of b.N tasks, in microseconds.
//
//	go test -run '^$' -bench HandOff -benchtime 300x -count 5 ./internal/bench
func BenchmarkHandOff(b *testing.B) {
	b.Run("Schedule", func(b *testing.B) { benchHandOff(b, false) })
	b.Run("Retry", func(b *testing.B) { benchHandOff(b, true) })
}

func benchHandOff(b *testing.B, retry bool) {
	waits := &startWaits{}
	d := startDaemon(b, setup{observer: waits})
	cl, err := d.dial("worker")
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	c := cl.Service()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The poller fails first attempts when retries are measured and tells
	// the driver when the attempt it waits for has arrived. That attempt is
	// left running: completing it would queue a workflow task that the
	// driver's next poll would take for its own.
	got := make(chan time.Time, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		for ctx.Err() == nil {
			r, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "handoff", Identity: "bench"})
			at := time.Now()
			if err != nil {
				return
			}
			for _, t := range r.GetTasks() {
				if retry && t.GetAttempt() == 1 {
					c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: t.GetTaskToken(), Failure: &durablev1.Failure{Type: "Flaky"}})
					continue
				}
				got <- at
			}
		}
	})
	opts := &durablev1.ActivityOptions{
		TaskQueue:           "handoff",
		StartToCloseTimeout: durationpb.New(time.Minute),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 2, MaxIntervalMs: 2},
	}
	var handoff []time.Duration
	b.ResetTimer()
	for i := range b.N {
		// Starting the workflow and taking its task gives the poller, back
		// from its last task, time to park again before the schedule.
		id := fmt.Sprintf("handoff-%d", i)
		if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "HandOff", TaskQueue: "handoff-wf"}); err != nil {
			b.Fatal(err)
		}
		wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "handoff-wf", Identity: "bench"})
		if err != nil || len(wt.GetTaskToken()) == 0 {
			b.Fatalf("workflow task: %v", err)
		}
		began := time.Now()
		_, err = c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
			Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Work", ActivityOptions: opts,
		}}})
		if err != nil {
			b.Fatal(err)
		}
		handoff = append(handoff, (<-got).Sub(began))
	}
	b.StopTimer()
	if retry {
		reportQuantiles(b, "late", waits.of(2))
	} else {
		reportQuantiles(b, "handoff", handoff)
		reportQuantiles(b, "started", waits.of(1))
	}
	reportQuantiles(b, "sync", waits.syncs())
}

// reportQuantiles reports the median, p90, p99 and highest of ds in µs.
func reportQuantiles(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		b.Fatalf("no %s figures", name)
	}
	slices.Sort(ds)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(ds[len(ds)/2]), name+"-p50-µs")
	b.ReportMetric(us(ds[len(ds)*9/10]), name+"-p90-µs")
	b.ReportMetric(us(ds[len(ds)*99/100]), name+"-p99-µs")
	b.ReportMetric(us(ds[len(ds)-1]), name+"-max-µs")
}

// startWaits records the wait of every attempt the daemon leases, by
// attempt number.
type startWaits struct {
	mu     sync.Mutex
	waits  map[int32][]time.Duration
	synced []time.Duration
}

func (s *startWaits) AttemptStarted(_ string, attempt int32, waited time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waits == nil {
		s.waits = map[int32][]time.Duration{}
	}
	s.waits[attempt] = append(s.waits[attempt], waited)
}

func (*startWaits) AttemptEnded(string, engine.AttemptResult, time.Duration) {}
func (*startWaits) TimedOut(string, string)                                  {}
func (*startWaits) DeadLettered(string)                                      {}
func (*startWaits) Redriven(string)                                          {}
func (*startWaits) BatchCommitted(int, time.Duration)                        {}

func (s *startWaits) Synced(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced = append(s.synced, d)
}

func (s *startWaits) syncs() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.synced)
}

func (s *startWaits) of(attempt int32) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.waits[attempt])
}
