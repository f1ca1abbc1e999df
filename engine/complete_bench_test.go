package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// BenchmarkCompleteActivities completes b.N leased activities of one type
// from 32 goroutines, the batcher committing them together: the engine's
// and the store's share of a completion, without gRPC or a worker.
//
//	go test -run '^$' -bench CompleteActivities -benchmem ./engine
func BenchmarkCompleteActivities(b *testing.B) {
	mem, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.New(mem, engine.Options{Clock: engine.NewFakeClock(t0), Jitter: func(d time.Duration) time.Duration { return d }})
	if err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	defer e.Close()
	ctx := context.Background()
	poll := func() []*durablev1.ActivityTask {
		c, cancel := context.WithCancel(ctx)
		cancel()
		r, err := e.PollActivityTask(c, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w", MaxTasks: 100})
		if err != nil {
			b.Fatal(err)
		}
		return r.GetTasks()
	}
	// Workflows of 100 activities each, every activity leased.
	var tasks []*durablev1.ActivityTask
	for w := 0; len(tasks) < b.N; w++ {
		id := fmt.Sprintf("wf-%d", w)
		if _, err := e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "Fan", TaskQueue: "q"}); err != nil {
			b.Fatal(err)
		}
		c, cancel := context.WithCancel(ctx)
		cancel()
		wt, err := e.PollWorkflowTask(c, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
		if err != nil {
			b.Fatal(err)
		}
		var cmds []*durablev1.Command
		for i := range 100 {
			cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: fmt.Sprint(i), ActivityType: "Noop"})
		}
		if _, err := e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
			b.Fatal(err)
		}
		for got := poll(); len(got) > 0; got = poll() {
			tasks = append(tasks, got...)
		}
	}
	work := make(chan *durablev1.ActivityTask, len(tasks))
	for _, t := range tasks[:b.N] {
		work <- t
	}
	close(work)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range work {
				if _, err := e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: t.GetTaskToken()}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
