package engine_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
	pgstore "github.com/tinyllm/durable/store/postgres"
)

// BenchmarkLeaseAndComplete leases and completes b.N activities from 32
// goroutines, each polling (a long poll) for up to 10 tasks and completing
// them: the
// engine's and the store's share of the poll path (the heaps, or the
// store's claims on a shared store) and of a completion. It runs on the
// store DURABLE_TEST_STORE picks and reports the test process's CPU time
// per activity (the PostgreSQL server's is not in it).
//
//	DURABLE_TEST_STORE=postgres go test -run '^$' -bench LeaseAndComplete ./engine
func BenchmarkLeaseAndComplete(b *testing.B) {
	var st engine.Store
	var err error
	if usedStore() == "postgres" {
		st, err = pgstore.Open(testpg.Database(b), pgstore.Options{})
	} else {
		st, err = badgerstore.Open("", badgerstore.Options{InMemory: true})
	}
	if err != nil {
		b.Fatal(err)
	}
	// Polls park when the queue is empty, as a worker's do; the last ones
	// wait out the short poll timeout after the end.
	e, err := engine.New(st, engine.Options{PollTimeout: 50 * time.Millisecond, Jitter: func(d time.Duration) time.Duration { return d }})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	defer e.Close()
	ctx := context.Background()
	for w := 0; w*100 < b.N; w++ {
		id := fmt.Sprintf("wf-%d", w)
		if _, err := e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "Fan", TaskQueue: "q"}); err != nil {
			b.Fatal(err)
		}
		wt, err := e.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
		if err != nil {
			b.Fatal(err)
		}
		var cmds []*durablev1.Command
		for i := range min(100, b.N-w*100) {
			cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: fmt.Sprint(i), ActivityType: "Noop", ActivityOptions: &durablev1.ActivityOptions{TaskQueue: "a"}})
		}
		if _, err := e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
			b.Fatal(err)
		}
	}
	var mu sync.Mutex
	left := b.N
	b.ReportAllocs()
	before := cpuTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				mu.Lock()
				done := left <= 0
				mu.Unlock()
				if done {
					return
				}
				r, err := e.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "a", Identity: "w", MaxTasks: 10})
				if err != nil {
					b.Error(err)
					return
				}
				for _, t := range r.GetTasks() {
					if _, err := e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: t.GetTaskToken()}); err != nil {
						b.Error(err)
						return
					}
				}
				mu.Lock()
				left -= len(r.GetTasks())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
