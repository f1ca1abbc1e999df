// Package worker runs workflow and activity functions for one task queue:
// it long-polls the daemon with bounded concurrency, runs what it gets and
// reports the outcome.
//
//	w := worker.New(c, "orders", worker.Options{})
//	w.RegisterWorkflow(Order)
//	w.RegisterActivity(Charge)
//	err := w.Run(ctx) // until ctx ends, then a graceful stop
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/workflow"
)

// Options tune a Worker. Zero fields take the defaults named on them.
type Options struct {
	// MaxConcurrentActivities bounds the attempts run at once; default 100.
	MaxConcurrentActivities int
	// MaxConcurrentWorkflowTasks bounds the workflow tasks run at once;
	// default 10.
	MaxConcurrentWorkflowTasks int
	// Identity names this worker in history; default the client's identity
	// (host:pid).
	Identity string
	// StopTimeout is how long Stop lets running attempts finish before it
	// reports them failed (type WorkerShutdown) so they retry elsewhere;
	// default 10 s.
	StopTimeout time.Duration
	// Logger receives the worker's logs; default slog.Default().
	Logger *slog.Logger
	// MaxCachedWorkflows bounds the running workflows whose state the worker
	// keeps between their tasks, least recently used out first; default
	// 1,000; negative keeps none. A workflow the worker keeps is sent only
	// the events that are new to it instead of its whole history, which
	// the worker would otherwise replay on every task; the cost is the
	// memory of the kept workflows: a goroutine stack per coroutine (about
	// 8 KB) and about 250 bytes per activity the workflow has scheduled,
	// its result not counted.
	MaxCachedWorkflows int
}

func (o Options) withDefaults(c *client.Client) Options {
	if o.MaxConcurrentActivities <= 0 {
		o.MaxConcurrentActivities = 100
	}
	if o.MaxConcurrentWorkflowTasks <= 0 {
		o.MaxConcurrentWorkflowTasks = 10
	}
	if o.Identity == "" {
		o.Identity = c.Identity()
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxCachedWorkflows == 0 {
		o.MaxCachedWorkflows = 1000
	}
	return o
}

// Worker polls one task queue. Register every function before Start.
type Worker struct {
	c     *client.Client
	queue string
	opts  Options
	log   *slog.Logger

	mu         sync.Mutex
	workflows  map[string]*workflow.Definition
	activities map[string]*activityDef
	started    bool
	stopped    bool

	pollCtx    context.Context
	stopPoll   context.CancelFunc
	pollers    sync.WaitGroup
	wfTasks    sync.WaitGroup
	running    map[*attempt]struct{}
	runningMu  sync.Mutex
	attemptsWG sync.WaitGroup
	// runners hosts attempts and polls (runners.go).
	runners *runners

	// cache keeps running workflows between tasks (nil when
	// MaxCachedWorkflows is negative); session tells the daemon which
	// worker polls, so that it sends a cached workflow only new events.
	cache   *workflowCache
	session string
}

// New returns a worker for taskQueue that talks to the daemon through c and
// decodes payloads with c's converter.
func New(c *client.Client, taskQueue string, opts Options) *Worker {
	opts = opts.withDefaults(c)
	w := &Worker{
		c:          c,
		queue:      taskQueue,
		opts:       opts,
		log:        opts.Logger.With("task_queue", taskQueue, "identity", opts.Identity),
		workflows:  map[string]*workflow.Definition{},
		activities: map[string]*activityDef{},
		running:    map[*attempt]struct{}{},
		runners:    newRunners(),
	}
	if opts.MaxCachedWorkflows > 0 {
		w.cache = newWorkflowCache(opts.MaxCachedWorkflows)
		w.session = newSession()
	}
	return w
}

// newSession returns an id no other worker uses: the daemon sends partial
// histories to the session that ran a workflow's previous task, so two
// workers must never share one.
func newSession() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// RegisterWorkflow registers fn, of shape func(workflow.Context[, T]) ([R,]
// error), under its function name without the package path. It panics on a
// wrong shape or a duplicate name, as a misconfigured worker should not start.
func (w *Worker) RegisterWorkflow(fn any) { w.RegisterWorkflowWithName(fn, "") }

// RegisterWorkflowWithName is RegisterWorkflow under an explicit name.
func (w *Worker) RegisterWorkflowWithName(fn any, name string) {
	if name == "" {
		name = funcName(fn)
	}
	def, err := workflow.NewDefinition(fn)
	if err != nil {
		panic(fmt.Sprintf("worker: register workflow %q: %v", name, err))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.workflows[name]; dup {
		panic(fmt.Sprintf("worker: workflow %q registered twice", name))
	}
	w.workflows[name] = def
}

// RegisterActivity registers fn, of shape func(context.Context[, T]) ([R,]
// error), under its function name without the package path. It panics on a
// wrong shape or a duplicate name.
func (w *Worker) RegisterActivity(fn any) { w.RegisterActivityWithName(fn, "") }

// RegisterActivityWithName is RegisterActivity under an explicit name.
func (w *Worker) RegisterActivityWithName(fn any, name string) {
	if name == "" {
		name = funcName(fn)
	}
	def, err := newActivityDef(fn)
	if err != nil {
		panic(fmt.Sprintf("worker: register activity %q: %v", name, err))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, dup := w.activities[name]; dup {
		panic(fmt.Sprintf("worker: activity %q registered twice", name))
	}
	w.activities[name] = def
}

func funcName(fn any) string {
	if reflect.ValueOf(fn).Kind() != reflect.Func {
		panic(fmt.Sprintf("worker: %T is not a function", fn))
	}
	return workflow.FuncName(fn)
}

// Start begins polling in the background. It fails if nothing is registered
// or the worker was already started.
func (w *Worker) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return errors.New("worker: already started")
	}
	if len(w.workflows) == 0 && len(w.activities) == 0 {
		return errors.New("worker: nothing registered")
	}
	// The daemon refuses every call of an identity that is not a valid
	// id; say so now rather than poll in vain.
	if err := activity.CheckID(w.opts.Identity); err != nil {
		return fmt.Errorf("worker: identity %q %w", w.opts.Identity, err)
	}
	w.started = true
	w.pollCtx, w.stopPoll = context.WithCancel(context.Background())
	if len(w.workflows) > 0 {
		slots := make(chan struct{}, w.opts.MaxConcurrentWorkflowTasks)
		for range min(2, w.opts.MaxConcurrentWorkflowTasks) {
			w.pollers.Add(1)
			go w.pollWorkflowTasks(slots)
		}
	}
	if len(w.activities) > 0 {
		w.pollers.Add(1)
		go w.pollActivityTasks()
	}
	w.log.Info("worker started", "workflows", len(w.workflows), "activities", len(w.activities))
	return nil
}

// Stop stops polling, lets running attempts finish within StopTimeout, then
// reports the ones still running as failed (retryable, type WorkerShutdown)
// and cancels their contexts. It returns once every report was sent.
func (w *Worker) Stop() {
	w.mu.Lock()
	if !w.started || w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.mu.Unlock()

	w.stopPoll()
	w.pollers.Wait()

	done := make(chan struct{})
	go func() { w.attemptsWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.opts.StopTimeout):
		w.abandonRunning()
	}
	w.wfTasks.Wait()
	w.runners.close()
	if w.cache != nil {
		w.cache.clear()
	}
	w.log.Info("worker stopped")
}

// Run starts the worker and blocks until ctx ends, then stops gracefully.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	w.Stop()
	return nil
}
