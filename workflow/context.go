package workflow

import (
	"time"
)

// Context is the workflow's counterpart of context.Context: it carries the
// coroutine that is running and the activity options in effect. Pass the
// ctx a function received (or one derived from it) to every call in this
// package; never share one between coroutines started with Go.
type Context interface {
	state() *wfContext
}

type wfContext struct {
	env     *env
	co      *coroutine
	actOpts ActivityOptions
}

func (c *wfContext) state() *wfContext { return c }

func (c *wfContext) with(f func(*wfContext)) Context {
	cp := *c
	f(&cp)
	return &cp
}

// Info describes the workflow execution and the task running it.
type Info struct {
	WorkflowID   string
	WorkflowType string
	TaskQueue    string
	// Attempt is the attempt of the current workflow task: above 1 after the
	// code failed a task (a panic, non-determinism).
	Attempt int
	// StartTime is when the workflow was started.
	StartTime time.Time
}

// GetInfo returns the workflow's Info.
func GetInfo(ctx Context) Info { return ctx.state().env.info }

// Now returns the workflow's clock: the time of the workflow task being run,
// taken from history, so that a replay sees the same value. Use it instead of
// time.Now.
func Now(ctx Context) time.Time { return ctx.state().env.now }

// IsReplaying reports whether the code is re-running over history that is
// already recorded. Use it to silence side effects such as logs.
func IsReplaying(ctx Context) bool { return ctx.state().env.replaying }

// Go starts fn as a coroutine: a deterministic stand-in for a goroutine. fn
// receives its own Context, derived from ctx; use that one inside fn.
func Go(ctx Context, fn func(ctx Context)) {
	c := ctx.state()
	c.env.coroSeq++
	name := "go-" + itoa(c.env.coroSeq)
	c.env.d.spawn(name, func(co *coroutine) {
		fn(c.with(func(n *wfContext) { n.co = co }))
	})
}

// Await blocks until cond returns true. cond is evaluated whenever the
// workflow may have made progress; it must only read workflow state.
func Await(ctx Context, cond func() bool) {
	ctx.state().co.yieldUntil(cond)
}
