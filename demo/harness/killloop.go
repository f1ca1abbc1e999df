package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/demo/flaky"
	"github.com/tinyllm/durable/demo/sink"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// FlakyPlan is a kill-loop run of FlakyDemo.
type FlakyPlan struct {
	// WorkflowID names the run; default "flaky-demo".
	WorkflowID string
	// Input is FlakyDemo's input.
	Input flaky.Input
	// Workers is how many workers run at once; default 3. A killed worker is
	// replaced at once.
	Workers int
	// WorkerKills is how many times a worker is SIGKILLed, each time right
	// after the sink made one of its deliveries durable and before the worker
	// heard back, so that attempt never reports and its effect is redelivered.
	WorkerKills int
	// DaemonRestarts is how many times durabled is SIGKILLed and started again
	// on the same data dir and port, each after the workflow's history grew.
	DaemonRestarts int
	// Timeout bounds the whole run; default 2 min.
	Timeout time.Duration
	// Logf, if set, narrates the run.
	Logf func(format string, args ...any)
}

// step kinds of a kill plan.
const (
	killWorker    = "kill-worker"
	restartDaemon = "restart-daemon"
)

// schedule interleaves kills and restarts evenly: for 8 and 2,
// k k k R k k R k k k.
func schedule(kills, restarts int) []string {
	n := kills + restarts
	plan := make([]string, 0, n)
	isRestart := map[int]bool{}
	for j := range restarts {
		isRestart[(j+1)*n/(restarts+1)] = true
	}
	for i := range n {
		if isRestart[i] && restarts > 0 {
			plan = append(plan, restartDaemon)
			restarts--
		} else {
			plan = append(plan, killWorker)
		}
	}
	return plan
}

// killLoop is the state shared by the sink hook (worker kills) and the
// history poller (daemon restarts). Each step fires once the previous one is
// done and progress was observed since: deliveryStep more sink deliveries
// for a kill, historyStep more history events for a restart.
type killLoop struct {
	c            *Cluster
	logf         func(string, ...any)
	deliveryStep int
	historyStep  int64
	replace      chan struct{}

	mu             sync.Mutex
	plan           []string
	next           int
	baseDeliveries int
	baseHistory    int64
	history        int64
	wtHolder       string // identity of the worker holding the workflow task
	kills          int
	restarts       int
	finished       bool
}

func (k *killLoop) due(kind string) bool {
	return !k.finished && k.next < len(k.plan) && k.plan[k.next] == kind
}

// afterApply runs in the sink between a delivery becoming durable and its
// acknowledgement.
func (k *killLoop) afterApply(d sink.Delivery, pid int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.due(killWorker) || k.c.Sink().Stats().Deliveries < k.baseDeliveries+k.deliveryStep {
		return
	}
	p := k.c.Worker(pid)
	if p == nil || p.Name == k.wtHolder {
		return
	}
	select {
	case <-p.Done():
		return // already gone; wait for a delivery by a live worker
	default:
	}
	p.Kill()
	k.kills++
	k.next++
	k.baseDeliveries = k.c.Sink().Stats().Deliveries
	k.baseHistory = k.history
	k.logf("SIGKILL %s (pid %d) right after it delivered %s (delivery #%d of that key)", p.Name, pid, d.Key, d.Count)
	select {
	case k.replace <- struct{}{}:
	default:
	}
}

// RunFlaky starts FlakyDemo on c with plan.Workers workers, carries out the
// kills and restarts of the plan while it runs, waits for the workflow to
// close and reports. An error means the run could not be carried out; a
// Report whose ExactlyOnce is false means it ran and an effect was lost or
// doubled.
func RunFlaky(ctx context.Context, c *Cluster, p FlakyPlan) (*Report, error) {
	if p.WorkflowID == "" {
		p.WorkflowID = "flaky-demo"
	}
	if p.Workers <= 0 {
		p.Workers = 3
	}
	if p.Timeout == 0 {
		p.Timeout = 2 * time.Minute
	}
	if p.Input.Activities == 0 {
		p.Input.Activities = flaky.DefaultActivities
	}
	logf := p.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	start := time.Now()

	events := p.WorkerKills + p.DaemonRestarts
	k := &killLoop{
		c: c, logf: logf, plan: schedule(p.WorkerKills, p.DaemonRestarts),
		// Spread the steps over the first deliveries: the workflow cannot
		// finish before every activity delivered once, so all steps fire.
		deliveryStep: max(1, p.Input.Activities/(events+1)),
		historyStep:  2,
		replace:      make(chan struct{}, 1),
	}
	c.SetAfterApply(k.afterApply)
	defer func() {
		k.mu.Lock()
		k.finished = true
		k.mu.Unlock()
	}()

	for range p.Workers {
		w, err := c.StartWorker()
		if err != nil {
			return nil, err
		}
		logf("started %s (pid %d)", w.Name, w.PID())
	}
	cl, err := client.Dial(ctx, c.Addr())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if _, err := cl.Start(ctx, flaky.WorkflowName, p.Input, client.StartOptions{ID: p.WorkflowID}); err != nil {
		return nil, err
	}
	logf("started %s %s: %+v", flaky.WorkflowName, p.WorkflowID, p.Input)

	if err := k.drive(ctx, cl, p); err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.finished = true
	kills, restarts := k.kills, k.restarts
	k.mu.Unlock()

	hist, err := retryUnavailable(ctx, func(ctx context.Context) ([]*durablev1.HistoryEvent, error) {
		return cl.History(ctx, p.WorkflowID)
	})
	if err != nil {
		return nil, err
	}
	desc, err := retryUnavailable(ctx, func(ctx context.Context) (*durablev1.DescribeWorkflowResponse, error) {
		return cl.Describe(ctx, p.WorkflowID)
	})
	if err != nil {
		return nil, err
	}
	wf := desc.GetWorkflow()
	r := newReport(p.WorkflowID, wf, hist, c.Sink())
	r.WorkerKills, r.DaemonRestarts = kills, restarts
	r.Elapsed = time.Since(start)
	r.ElapsedMS = r.Elapsed.Milliseconds()
	return r, nil
}

// drive polls the workflow's history until it closes, restarting the daemon
// when the plan says so and replacing killed workers.
func (k *killLoop) drive(ctx context.Context, cl *client.Client, p FlakyPlan) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("harness: %s did not close: %w", p.WorkflowID, ctx.Err())
		case <-k.replace:
			for len(k.c.Workers()) < p.Workers {
				w, err := k.c.StartWorker()
				if err != nil {
					return err
				}
				k.logf("started %s (pid %d)", w.Name, w.PID())
			}
			continue
		case <-tick.C:
		}
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		hist, err := cl.History(hctx, p.WorkflowID)
		cancel()
		if err != nil {
			continue // the daemon is restarting; the client reconnects
		}
		closed, busy, holder := workflowTaskState(hist)
		if closed {
			return nil
		}
		k.mu.Lock()
		k.history = int64(len(hist))
		k.wtHolder = holder
		if k.baseHistory < 0 {
			k.baseHistory = k.history // first look after a restart
		}
		restart := k.due(restartDaemon) && k.history >= k.baseHistory+k.historyStep && !busy
		if restart {
			k.next++ // kills may go on while the daemon is down
		}
		k.mu.Unlock()
		if !restart {
			continue
		}
		k.logf("SIGKILL durabled at history length %d, restart on %s", len(hist), k.c.Addr())
		t0 := time.Now()
		if err := k.c.RestartDaemon(ctx); err != nil {
			return err
		}
		k.mu.Lock()
		k.restarts++
		k.baseDeliveries = k.c.Sink().Stats().Deliveries
		k.baseHistory = -1
		k.mu.Unlock()
		k.logf("durabled (pid %d) back after %s", k.c.DaemonPID(), time.Since(t0).Round(time.Millisecond))
	}
}

// workflowTaskState reads from history whether the workflow closed, whether
// a workflow task is outstanding (scheduled or handed out) and which worker
// holds it, if one is handed out.
//
// The kill loop leaves workflow tasks alone where it can: a worker killed
// while holding one, or a daemon killed while one is being reported (the
// worker does not retry that report), leaves the task to its lease timeout,
// 10 s of nothing that proves nothing about effects.
func workflowTaskState(hist []*durablev1.HistoryEvent) (closed, busy bool, holder string) {
	for _, e := range hist {
		switch e.GetType() {
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			busy = true
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED:
			busy, holder = true, e.GetIdentity()
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED, durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED:
			busy, holder = false, ""
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
			closed = true
		}
	}
	return closed, busy, holder
}

// retryUnavailable calls fn until it succeeds or ctx ends, riding out a
// daemon restart.
func retryUnavailable[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := fn(cctx)
		cancel()
		if err == nil {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, errors.Join(err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
