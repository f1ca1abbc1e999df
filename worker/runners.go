package worker

import "sync/atomic"

// maxIdleRunners bounds the goroutines runners keeps waiting for work: a
// few kilobytes of stack each.
const maxIdleRunners = 128

// runners runs attempts and polls on goroutines kept from the ones before.
// A goroutine started for each grew its stack, by copying, to the depth of
// a gRPC call every time: runtime.newstack was 9 % of an SDK worker's CPU
// under load (BenchmarkSDKThroughput) and 8 % with one activity at a time
// (BenchmarkActivityLatency/SDK). A goroutine that has run its function
// waits for the next one, until the worker stops or maxIdleRunners wait.
//
// Nothing waits for a runner: run hands the function to one that is waiting
// or starts a goroutine, so a function that never returns, or ends its
// goroutine (runtime.Goexit), costs only its own goroutine.
type runners struct {
	work chan func()
	stop chan struct{}
	idle atomic.Int32
}

func newRunners() *runners {
	return &runners{work: make(chan func()), stop: make(chan struct{})}
}

// run runs fn on a goroutine of its own, as a go statement does.
func (r *runners) run(fn func()) {
	select {
	case r.work <- fn:
	default:
		go r.loop(fn)
	}
}

func (r *runners) loop(fn func()) {
	for {
		fn()
		if r.idle.Add(1) > maxIdleRunners {
			r.idle.Add(-1)
			return
		}
		select {
		case fn = <-r.work:
			r.idle.Add(-1)
		case <-r.stop:
			r.idle.Add(-1)
			return
		}
	}
}

// close ends the waiting goroutines; a function running finishes first, and
// one run after close still runs.
func (r *runners) close() { close(r.stop) }
