package worker_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/worker"
	"github.com/tinyllm/durable/workflow"
)

// polled is one workflow task as a worker received it.
type polled struct {
	workflowID string
	from       int64 // history_start_event_id: 0 for the whole history
	events     int
}

// taskLog records the workflow tasks a client receives and the history it
// asks for on cache misses.
type taskLog struct {
	mu      sync.Mutex
	polls   []polled
	fetches atomic.Int32
}

func (l *taskLog) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		return err
	}
	switch r := reply.(type) {
	case *durablev1.PollWorkflowTaskResponse:
		if len(r.GetTaskToken()) > 0 {
			l.mu.Lock()
			l.polls = append(l.polls, polled{workflowID: r.GetWorkflowId(), from: r.GetHistoryStartEventId(), events: len(r.GetHistory())})
			l.mu.Unlock()
		}
	case *durablev1.GetWorkflowHistoryResponse:
		if _, ok := req.(*durablev1.GetWorkflowTaskHistoryRequest); ok {
			l.fetches.Add(1)
		}
	}
	return nil
}

// of returns the tasks of one workflow, in the order received.
func (l *taskLog) of(id string) []polled {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []polled
	for _, p := range l.polls {
		if p.workflowID == id {
			out = append(out, p)
		}
	}
	return out
}

// dialLogged is dial with a taskLog on the connection.
func dialLogged(t *testing.T, addr string) (*client.Client, *taskLog) {
	t.Helper()
	l := &taskLog{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.WithIdentity(t.Name()), client.WithDialOptions(grpc.WithChainUnaryInterceptor(l.intercept)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, l
}

// steps runs Step(1) … Step(n) one after another: one workflow task each.
func steps(ctx workflow.Context, n int) (int, error) {
	ctx = workflow.WithActivityOptions(ctx, fastRetry)
	sum := 0
	for i := 1; i <= n; i++ {
		var v int
		if err := workflow.ExecuteActivity(ctx, "Step", fmt.Sprintf("%s/%d", workflow.GetInfo(ctx).WorkflowID, i)).Get(ctx, &v); err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// stepResult is what Step returns for "<workflow>/<i>": i.
func stepResult(in string) int {
	var i int
	fmt.Sscanf(in[strings.LastIndexByte(in, '/')+1:], "%d", &i)
	return i
}

func TestFanOutRunsOnPartialHistories(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	wc, log := dialLogged(t, addr)
	startWorker(t, wc, "sticky-fan", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflow(FanOut)
		w.RegisterActivity(Double)
	})
	ctx := testCtx(t)
	run, err := c.Start(ctx, "FanOut", 200, client.StartOptions{TaskQueue: "sticky-fan"})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 2*i {
			t.Fatalf("result %d = %d, want %d", i, v, 2*i)
		}
	}
	tasks := log.of(run.ID)
	if len(tasks) < 2 || tasks[0].from != 0 {
		t.Fatalf("tasks = %+v, want a first one with the whole history and more after it", tasks)
	}
	sent := 0
	for i, p := range tasks[1:] {
		if p.from <= 1 {
			t.Errorf("task %d of %d carried the whole history (%d events); one worker that ran every task should get only new events", i+2, len(tasks), p.events)
		}
		sent += p.events
	}
	if n := log.fetches.Load(); n != 0 {
		t.Errorf("the worker asked for the history %d times; it had every workflow cached", n)
	}
	// Every event but the first task's is sent once, plus the task's own
	// Scheduled and Started: linear in the fan-out, not quadratic.
	if total := len(history(t, c, run.ID)); sent > total {
		t.Errorf("partial tasks carried %d events in all, more than the history's %d", sent, total)
	}
}

func TestWorkflowsEvictedFromACacheOfOneStillComplete(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	wc, log := dialLogged(t, addr)
	const rounds = 5
	// Step(i) of one workflow waits for Step(i) of the other, so that their
	// tasks interleave and each evicts the other from the cache.
	var mu sync.Mutex
	arrived := map[int]int{}
	released := map[int]chan struct{}{}
	step := func(ctx context.Context, in string) (int, error) {
		i := stepResult(in)
		mu.Lock()
		ch, ok := released[i]
		if !ok {
			ch = make(chan struct{})
			released[i] = ch
		}
		if arrived[i]++; arrived[i] == 2 {
			close(ch)
		}
		mu.Unlock()
		select {
		case <-ch:
			return i, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	startWorker(t, wc, "sticky-evict", worker.Options{MaxCachedWorkflows: 1}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(steps, "Steps")
		w.RegisterActivityWithName(step, "Step")
	})
	ctx := testCtx(t)
	var runs []*client.Run
	for range 2 {
		run, err := c.Start(ctx, "Steps", rounds, client.StartOptions{TaskQueue: "sticky-evict"})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run)
	}
	for _, run := range runs {
		var sum int
		if err := run.Get(ctx, &sum); err != nil || sum != rounds*(rounds+1)/2 {
			t.Fatalf("%s: Get = %d, %v; want %d", run.ID, sum, err, rounds*(rounds+1)/2)
		}
		if n := countEvents(history(t, c, run.ID), durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED); n != 0 {
			t.Errorf("%s: %d failed workflow tasks, want none", run.ID, n)
		}
	}
	if log.fetches.Load() == 0 {
		t.Error("no task asked for the start of its history: the cache of one held both workflows")
	}
}

func TestAnotherWorkerTakingOverGetsTheWholeHistory(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	release := make(chan struct{})
	step := func(ctx context.Context, in string) (int, error) {
		if i := stepResult(in); i == 3 {
			select {
			case <-release:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return stepResult(in), nil
	}
	// Activities run on a worker of their own, so that only the workflow
	// side changes hands.
	startWorker(t, c, "sticky-over", worker.Options{}, func(w *worker.Worker) { w.RegisterActivityWithName(step, "Step") })
	register := func(w *worker.Worker) { w.RegisterWorkflowWithName(steps, "Steps") }
	firstC, firstLog := dialLogged(t, addr)
	first := startWorker(t, firstC, "sticky-over", worker.Options{}, register)
	ctx := testCtx(t)
	run, err := c.Start(ctx, "Steps", 5, client.StartOptions{TaskQueue: "sticky-over"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Step 3 to be scheduled", func() bool { return pending(t, c, run.ID, "3") != nil })
	first.Stop()
	firstTasks := firstLog.of(run.ID)
	if len(firstTasks) != 3 || firstTasks[1].from <= 1 || firstTasks[2].from <= 1 {
		t.Fatalf("the first worker's tasks = %+v, want three, the last two partial", firstTasks)
	}

	secondC, secondLog := dialLogged(t, addr)
	startWorker(t, secondC, "sticky-over", worker.Options{}, register)
	close(release)
	var sum int
	if err := run.Get(ctx, &sum); err != nil || sum != 15 {
		t.Fatalf("Get = %d, %v; want 15", sum, err)
	}
	tasks := secondLog.of(run.ID)
	if len(tasks) != 3 || tasks[0].from != 0 || tasks[0].events <= firstTasks[2].events {
		t.Fatalf("the second worker's tasks = %+v, want three, the first with the whole history", tasks)
	}
	if tasks[1].from <= 1 || tasks[2].from <= 1 {
		t.Errorf("the second worker's later tasks = %+v, want them partial", tasks[1:])
	}
	if n := secondLog.fetches.Load(); n != 0 {
		t.Errorf("the second worker asked for the history %d times, want none", n)
	}
}

func TestDaemonRestartFallsBackToTheWholeHistory(t *testing.T) {
	t.Parallel()
	// The worker outlives the daemon, so the daemon comes back on the same
	// port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	d := testdaemon.Exec(t, t.TempDir(), "--listen", listen)
	c := dial(t, d.Addr)
	wc, log := dialLogged(t, d.Addr)
	release := make(chan struct{})
	var blocked atomic.Bool
	step := func(ctx context.Context, in string) (int, error) {
		if i := stepResult(in); i == 3 {
			blocked.Store(true)
			select {
			case <-release:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return stepResult(in), nil
	}
	startWorker(t, wc, "sticky-restart", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(steps, "Steps")
		w.RegisterActivityWithName(step, "Step")
	})
	ctx := testCtx(t)
	run, err := c.Start(ctx, "Steps", 5, client.StartOptions{TaskQueue: "sticky-restart"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Step 3 to run", blocked.Load)
	before := log.of(run.ID)
	if len(before) != 3 || before[2].from <= 1 {
		t.Fatalf("tasks before the restart = %+v, want three, the last partial", before)
	}
	d.Kill()
	d.Restart()
	if d.Addr != listen {
		t.Fatalf("the daemon came back on %s, not %s", d.Addr, listen)
	}
	close(release) // Step 3's report is retried until the daemon answers
	var sum int
	if err := run.Get(ctx, &sum); err != nil || sum != 15 {
		t.Fatalf("Get = %d, %v; want 15", sum, err)
	}
	after := log.of(run.ID)[len(before):]
	if len(after) != 3 || after[0].from != 0 {
		t.Fatalf("tasks after the restart = %+v, want three, the first with the whole history", after)
	}
	if after[1].from <= 1 || after[2].from <= 1 {
		t.Errorf("later tasks after the restart = %+v, want them partial again", after[1:])
	}
}

// changing is Steps whose first activity's type a test can change while
// the workflow runs: what a deploy of incompatible code does.
var changing atomic.Bool

func TestNonDeterminismOfACachedWorkflowFailsItsTask(t *testing.T) {
	addr, c := setup(t)
	wc, log := dialLogged(t, addr)
	gate := make(chan struct{})
	var gated atomic.Bool
	wf := func(ctx workflow.Context, n int) error {
		ctx = workflow.WithActivityOptions(ctx, fastRetry)
		first := "Step"
		if changing.Load() {
			first = "Other"
		}
		if err := workflow.ExecuteActivity(ctx, first, workflow.GetInfo(ctx).WorkflowID+"/1").Get(ctx, nil); err != nil {
			return err
		}
		for i := 2; i <= n; i++ {
			if err := workflow.ExecuteActivity(ctx, "Step", fmt.Sprintf("%s/%d", workflow.GetInfo(ctx).WorkflowID, i)).Get(ctx, nil); err != nil {
				return err
			}
		}
		return nil
	}
	step := func(ctx context.Context, in string) (int, error) {
		if strings.HasPrefix(in, "changes/") && stepResult(in) == 2 {
			gated.Store(true)
			select {
			case <-gate:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return stepResult(in), nil
	}
	startWorker(t, wc, "sticky-nd", worker.Options{MaxCachedWorkflows: 1}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(wf, "Changes")
		w.RegisterActivityWithName(step, "Step")
		w.RegisterActivityWithName(step, "Other")
	})
	ctx := testCtx(t)
	run, err := c.Start(ctx, "Changes", 3, client.StartOptions{ID: "changes", TaskQueue: "sticky-nd"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Step 2 to run", gated.Load)
	// The code changes while the workflow is cached; another workflow
	// takes its place in the cache, so its next task replays the history
	// against the changed code.
	changing.Store(true)
	defer changing.Store(false)
	other, err := c.Start(ctx, "Changes", 1, client.StartOptions{ID: "evicts", TaskQueue: "sticky-nd"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	close(gate)
	var failure *durablev1.Failure
	waitFor(t, "a WorkflowTaskFailed event", func() bool {
		for _, ev := range history(t, c, run.ID) {
			if ev.GetType() == durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED {
				failure = ev.GetFailure()
				return true
			}
		}
		return false
	})
	if failure.GetType() != "NonDeterminism" || !strings.Contains(failure.GetMessage(), "Step") || !strings.Contains(failure.GetMessage(), "Other") {
		t.Fatalf("workflow task failure = %v, want NonDeterminism naming Step and Other", failure)
	}
	if log.fetches.Load() == 0 {
		t.Error("the evicted workflow's task did not ask for the start of its history")
	}
	// The code is fixed: the retry, which carries the whole history again,
	// completes the workflow.
	changing.Store(false)
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	tasks := log.of(run.ID)
	for i := 1; i < len(tasks); i++ {
		if tasks[i-1].from > 1 && tasks[i].from == 0 {
			return // the partial task failed; its retry came with the whole history
		}
	}
	t.Errorf("tasks = %+v, want the retry after the failed (partial) task to carry the whole history", tasks)
}
