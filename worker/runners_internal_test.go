package worker

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitIdle waits until n goroutines of r wait for work: counted as idle,
// and blocked in the select of loop, which is where run finds them.
func waitIdle(t *testing.T, r *runners, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.idle.Load() != n || blockedInLoop(r) != int(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d runners counted idle and %d blocked waiting for work, want %d", r.idle.Load(), blockedInLoop(r), n)
		}
		runtime.Gosched()
	}
}

// blockedInLoop counts the goroutines of r blocked in loop's select (a
// trace shows the receiver as loop's first argument).
func blockedInLoop(r *runners) int {
	loop := fmt.Sprintf("(*runners).loop(%p", r)
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[select") && strings.Contains(g, loop) {
			n++
		}
	}
	return n
}

func TestRunners_AFinishedGoroutineRunsTheNextFunction(t *testing.T) {
	r := newRunners()
	defer r.close()
	done := make(chan struct{})
	r.run(func() { close(done) })
	<-done
	waitIdle(t, r, 1)
	// The waiting goroutine takes the next function: while it runs, none
	// waits.
	release, running := make(chan struct{}), make(chan struct{})
	r.run(func() { close(running); <-release })
	<-running
	if n := r.idle.Load(); n != 0 {
		t.Errorf("%d runners wait while the only one runs the second function, want 0", n)
	}
	close(release)
	waitIdle(t, r, 1)
}

func TestRunners_FunctionsRunAtOnceWhenEveryGoroutineIsBusy(t *testing.T) {
	r := newRunners()
	defer r.close()
	const n = 10
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	for range n {
		r.run(func() { started.Done(); <-release })
	}
	started.Wait() // all ten run at once, on ten goroutines
	close(release)
	waitIdle(t, r, n)
}

func TestRunners_AGoroutineEndedByItsFunctionDoesNotHoldTheNext(t *testing.T) {
	r := newRunners()
	defer r.close()
	exited := make(chan struct{})
	r.run(func() {
		defer close(exited)
		runtime.Goexit()
	})
	<-exited
	done := make(chan struct{})
	r.run(func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the function after one that ended its goroutine did not run")
	}
}

func TestRunners_KeepAtMostTheirBoundWaitingAndNoneAfterClose(t *testing.T) {
	r := newRunners()
	var started sync.WaitGroup
	started.Add(maxIdleRunners + 20)
	release := make(chan struct{})
	for range maxIdleRunners + 20 {
		r.run(func() { started.Done(); <-release })
	}
	started.Wait()
	close(release)
	waitIdle(t, r, maxIdleRunners)
	r.close()
	waitIdle(t, r, 0)
	// A function run after close still runs.
	done := make(chan struct{})
	r.run(func() { close(done) })
	<-done
}
