package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
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
	// With several nodes, each time a node chosen at random among those
	// running is SIGKILLed while the others carry on, and started again
	// under its name and on its address once the database lets the name go;
	// one node always runs.
	DaemonRestarts int
	// KillSeed seeds the choice of the node to kill; default Input.Seed.
	KillSeed int64
	// Timeout bounds the whole run; default 2 min.
	Timeout time.Duration
	// Logf, if set, narrates the run.
	Logf func(format string, args ...any)
}

// killLoop is the state shared by the sink hook (worker kills) and the
// history poller (daemon restarts). Both are driven by progress observed,
// spread over the part of the run that must happen before the workflow can
// close, so every kill and restart of the plan fires:
//
//   - kill i (from 0) fires at the first delivery, by a worker not holding the
//     workflow task, once the sink counted (i+1)*deliveryStep deliveries;
//     FlakyDemo cannot close before N deliveries.
//   - restart j fires once history holds firstHistory + (j+1)*historyStep
//     events, whatever the workers are doing (their reports ride out the
//     restart); history ends past N+4+2N.
type killLoop struct {
	c            *Cluster
	cl           *client.Client
	workflowID   string
	logf         func(string, ...any)
	deliveryStep int
	firstHistory int
	historyStep  int
	replace      chan struct{}

	rng        *rand.Rand // picks the node to kill
	restarting sync.WaitGroup

	mu         sync.Mutex
	killsLeft  int
	restLeft   int
	kills      int
	restarts   int
	nodeKills  map[string]int
	down       map[int]bool // nodes killed and not back yet
	restartErr error
	finished   bool
}

// afterApply runs in the sink between a delivery becoming durable and its
// acknowledgement.
func (k *killLoop) afterApply(d sink.Delivery, pid int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.finished || k.killsLeft == 0 || k.c.Sink().Stats().Deliveries < (k.kills+1)*k.deliveryStep {
		return
	}
	p := k.c.Worker(pid)
	if p == nil {
		return
	}
	select {
	case <-p.Done():
		return // already gone; wait for a delivery by a live worker
	default:
	}
	if k.holdsWorkflowTask(p.Name) {
		return
	}
	p.Kill()
	k.kills++
	k.killsLeft--
	k.logf("SIGKILL %s (pid %d) right after it delivered %s (delivery #%d of that key)", p.Name, pid, d.Key, d.Count)
	select {
	case k.replace <- struct{}{}:
	default:
	}
}

// holdsWorkflowTask reads the latest history to tell whether the worker named
// name holds the workflow task; with the daemon down it cannot report the
// task anyway, so it counts as not holding it.
func (k *killLoop) holdsWorkflowTask(name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	hist, err := k.cl.History(ctx, k.workflowID)
	if err != nil {
		return false
	}
	_, holder := workflowTaskState(hist)
	return holder == name
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

	n := p.Input.Activities
	k := &killLoop{
		c: c, workflowID: p.WorkflowID, logf: logf,
		deliveryStep: max(1, n/(p.WorkerKills+1)),
		firstHistory: n + 4,
		historyStep:  max(1, 2*n/(p.DaemonRestarts+1)),
		killsLeft:    p.WorkerKills, restLeft: p.DaemonRestarts,
		replace:   make(chan struct{}, 1),
		nodeKills: map[string]int{}, down: map[int]bool{},
	}
	seed := p.KillSeed
	if seed == 0 {
		seed = p.Input.Seed
	}
	k.rng = rand.New(rand.NewPCG(uint64(seed), 0x6b696c6c))
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
	k.cl = cl
	c.SetAfterApply(k.afterApply)
	defer c.SetAfterApply(nil)
	if _, err := cl.Start(ctx, flaky.WorkflowName, p.Input, client.StartOptions{ID: p.WorkflowID}); err != nil {
		return nil, err
	}
	logf("started %s %s: %+v", flaky.WorkflowName, p.WorkflowID, p.Input)

	if err := k.drive(ctx, cl, p); err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.finished = true
	k.mu.Unlock()
	// Nodes killed late in the run come back before the record is read:
	// every node serves the end of the run.
	k.restarting.Wait()
	k.mu.Lock()
	kills, restarts, restartErr := k.kills, k.restarts, k.restartErr
	nodeKills := maps.Clone(k.nodeKills)
	k.mu.Unlock()
	if restartErr != nil {
		return nil, restartErr
	}

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
	r.Nodes = c.Nodes()
	if r.Nodes > 1 {
		r.NodeKills = nodeKills
	}
	r.addAcks(p.WorkflowID, c.Acks(), desc)
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
		closed, _ := workflowTaskState(hist)
		if closed {
			return nil
		}
		k.mu.Lock()
		restart := !k.finished && k.restLeft > 0 &&
			len(hist) >= k.firstHistory+(p.DaemonRestarts-k.restLeft+1)*k.historyStep
		if restart {
			k.restLeft--
		}
		k.mu.Unlock()
		if !restart {
			continue
		}
		if k.c.Nodes() > 1 {
			if !k.killNode(ctx, len(hist)) {
				k.mu.Lock()
				k.restLeft++ // no node to spare now; try again on the next tick
				k.mu.Unlock()
			}
			continue
		}
		k.logf("SIGKILL durabled at history length %d, restart on %s", len(hist), k.c.Addr())
		t0 := time.Now()
		if err := k.c.RestartDaemon(ctx); err != nil {
			return err
		}
		k.mu.Lock()
		k.restarts++
		k.mu.Unlock()
		k.logf("durabled (pid %d) back after %s", k.c.DaemonPID(), time.Since(t0).Round(time.Millisecond))
	}
}

// killNode SIGKILLs a node chosen at random among those running, unless it
// is the only one, and starts it again in the background once the database
// lets its name go. It reports whether it killed one.
func (k *killLoop) killNode(ctx context.Context, historyLen int) bool {
	k.mu.Lock()
	var up []int
	for i := range k.c.Nodes() {
		if !k.down[i] {
			up = append(up, i)
		}
	}
	if len(up) < 2 {
		k.mu.Unlock()
		return false
	}
	i := up[k.rng.IntN(len(up))]
	k.down[i] = true
	name := k.c.NodeName(i)
	k.nodeKills[name]++
	k.mu.Unlock()
	pid := k.c.NodePID(i)
	k.c.KillNode(i)
	k.logf("SIGKILL %s (pid %d) at history length %d; the other nodes carry on", name, pid, historyLen)
	k.restarting.Add(1)
	go func() {
		defer k.restarting.Done()
		t0 := time.Now()
		err := k.c.StartNode(ctx, i)
		k.mu.Lock()
		defer k.mu.Unlock()
		if err != nil {
			k.restartErr = errors.Join(k.restartErr, err)
			return
		}
		delete(k.down, i)
		k.restarts++
		k.logf("%s (pid %d) back on %s after %s", name, k.c.NodePID(i), k.c.NodeAddr(i), time.Since(t0).Round(time.Millisecond))
	}()
	return true
}

// workflowTaskState reads from history whether the workflow closed and which
// worker holds its workflow task, if one is handed out.
//
// The kill loop spares the worker holding the workflow task: a worker killed
// while holding one leaves the task to its lease timeout, 10 s of nothing that
// proves nothing about effects.
func workflowTaskState(hist []*durablev1.HistoryEvent) (closed bool, holder string) {
	for _, e := range hist {
		switch e.GetType() {
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED:
			holder = e.GetIdentity()
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED, durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED:
			holder = ""
		case durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
			closed = true
		}
	}
	return closed, holder
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
