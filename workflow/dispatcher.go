package workflow

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/tinyllm/durable/activity"
)

// blockedLimit is how long one coroutine may run without yielding. Workflow
// code that waits on anything but this package (a channel, time.Sleep, I/O)
// would otherwise hold the task until its lease ends, with no explanation.
var blockedLimit = 3 * time.Second

// The dispatcher runs coroutines one at a time, in creation order, each until
// it blocks: the goroutines are only a way to keep each coroutine's stack.
// Exactly one goroutine (a coroutine or the dispatcher) runs at any moment,
// handing over through channels, so workflow state needs no locks and every
// run over the same history makes the same steps.
type dispatcher struct {
	coros   []*coroutine
	exiting atomic.Bool // atomic: an abandoned coroutine may still read it
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
	// yielded is signalled when the coroutine blocks or ends.
	yielded chan struct{}
	// stuck marks a coroutine that ran past blockedLimit; it is abandoned.
	stuck bool
	// cond is set while the coroutine is blocked: it may run again once
	// cond returns true.
	cond func() bool
	done bool
}

func newDispatcher() *dispatcher {
	return &dispatcher{}
}

// spawn creates a coroutine that runs fn when the dispatcher gets to it.
func (d *dispatcher) spawn(name string, fn func(co *coroutine)) *coroutine {
	co := &coroutine{d: d, name: name, resume: make(chan struct{}), yielded: make(chan struct{})}
	d.coros = append(d.coros, co)
	go func() {
		defer func() {
			if r := recover(); r != nil && d.failure == nil {
				if nd, ok := r.(nondeterminism); ok {
					d.failure = &taskFailure{typ: activity.TypeNonDeterminism, message: nd.msg}
				} else {
					d.failure = &taskFailure{
						typ:     activity.TypePanic,
						message: fmt.Sprintf("workflow coroutine %s panicked: %v", name, r),
						details: debug.Stack(),
					}
				}
			}
			co.done = true
			co.yielded <- struct{}{}
		}()
		<-co.resume
		if d.exiting.Load() {
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
		co.yielded <- struct{}{}
		<-co.resume
		if co.d.exiting.Load() {
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
			if !co.wait() {
				return
			}
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
	d.exiting.Store(true)
	for _, co := range d.coros {
		if !co.done && !co.stuck {
			co.resume <- struct{}{}
			co.wait()
		}
	}
}

// wait waits for the coroutine to yield. One that runs past blockedLimit is
// abandoned (its goroutine leaks, blocked for good) and fails the task.
func (co *coroutine) wait() bool {
	t := time.NewTimer(blockedLimit)
	defer t.Stop()
	select {
	case <-co.yielded:
		return true
	case <-t.C:
		co.stuck = true
		if co.d.failure == nil {
			co.d.failure = &taskFailure{
				typ: activity.TypeBlocked,
				message: fmt.Sprintf("workflow coroutine %s ran %v without yielding: workflow code must wait only through this package (Future.Get, Sleep, Await), never on channels, locks, time.Sleep or I/O",
					co.name, blockedLimit),
			}
		}
		return false
	}
}
