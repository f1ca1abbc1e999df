package workflow

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// The dispatcher runs coroutines one at a time, in creation order, each until
// it blocks: the goroutines are only a way to keep each coroutine's stack.
// Exactly one goroutine (a coroutine or the dispatcher) runs at any moment,
// handing over through channels, so workflow state needs no locks and every
// run over the same history makes the same steps.
type dispatcher struct {
	coros   []*coroutine
	yielded chan struct{}
	exiting bool
	// failure is the first panic or non-determinism seen; it stops the run.
	failure *taskFailure
}

type taskFailure struct {
	typ     string
	message string
	details []byte
}

// nondeterminism is panicked by API calls that find history disagreeing with
// the code; the coroutine wrapper turns it into a task failure.
type nondeterminism struct{ msg string }

type coroutine struct {
	d      *dispatcher
	name   string
	resume chan struct{}
	// cond is set while the coroutine is blocked: it may run again once
	// cond returns true.
	cond func() bool
	done bool
}

func newDispatcher() *dispatcher {
	return &dispatcher{yielded: make(chan struct{})}
}

// spawn creates a coroutine that runs fn when the dispatcher gets to it.
func (d *dispatcher) spawn(name string, fn func(co *coroutine)) *coroutine {
	co := &coroutine{d: d, name: name, resume: make(chan struct{})}
	d.coros = append(d.coros, co)
	go func() {
		defer func() {
			if r := recover(); r != nil && d.failure == nil {
				if nd, ok := r.(nondeterminism); ok {
					d.failure = &taskFailure{typ: "NonDeterminism", message: nd.msg}
				} else {
					d.failure = &taskFailure{
						typ:     "Panic",
						message: fmt.Sprintf("workflow coroutine %s panicked: %v", name, r),
						details: debug.Stack(),
					}
				}
			}
			co.done = true
			d.yielded <- struct{}{}
		}()
		<-co.resume
		if d.exiting {
			return
		}
		fn(co)
	}()
	return co
}

// yieldUntil blocks the calling coroutine until cond holds.
func (co *coroutine) yieldUntil(cond func() bool) {
	for !cond() {
		co.cond = cond
		co.d.yielded <- struct{}{}
		<-co.resume
		if co.d.exiting {
			runtime.Goexit()
		}
	}
	co.cond = nil
}

// run steps every coroutine that can make progress until none can, a
// failure is recorded, or stop reports true.
func (d *dispatcher) run(stop func() bool) {
	for {
		progress := false
		for i := 0; i < len(d.coros); i++ {
			co := d.coros[i]
			if co.done || (co.cond != nil && !co.cond()) {
				continue
			}
			progress = true
			co.resume <- struct{}{}
			<-d.yielded
			if d.failure != nil || stop() {
				return
			}
		}
		if !progress {
			return
		}
	}
}

// close ends every coroutine that is still blocked or not yet started, so
// that no goroutine outlives the task.
func (d *dispatcher) close() {
	d.exiting = true
	for _, co := range d.coros {
		if !co.done {
			co.resume <- struct{}{}
			<-d.yielded
		}
	}
}
