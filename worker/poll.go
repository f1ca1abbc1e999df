package worker

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// maxBatch bounds the tasks one activity poll asks for.
const maxBatch = 16

// pollActivityTasks long-polls while at least one attempt slot is free,
// asking for as many tasks as there are free slots. Errors (the daemon
// restarting, say) back off and poll again; only Stop ends the polling.
func (w *Worker) pollActivityTasks() {
	w.pollActivities(make(chan struct{}, w.opts.MaxConcurrentActivities))
}

// pollActivities is the activity poll loop over the attempt slots. When a
// poll brings tasks, a new goroutine takes over the loop and this one starts
// the attempts and ends: the goroutine last started runs first, so the
// attempts are not queued behind the next poll's request (which would add
// its marshalling and write to every activity's latency); the next poll
// follows them, or runs beside them on another processor.
func (w *Worker) pollActivities(slots chan struct{}) {
	defer w.pollers.Done()
	release := func() { <-slots }
	var bo backoff
	for {
		select {
		case slots <- struct{}{}:
		case <-w.pollCtx.Done():
			return
		}
		n := 1
	fill:
		for n < maxBatch {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break fill
			}
		}
		resp, err := w.c.Service().PollActivityTask(w.pollCtx, &durablev1.PollActivityTaskRequest{
			TaskQueue: w.queue, Identity: w.opts.Identity, MaxTasks: int32(n),
		})
		tasks := resp.GetTasks()
		for range n - len(tasks) {
			release()
		}
		if len(tasks) > 0 {
			// This goroutine still counts as a poller: the Add cannot race
			// Stop's Wait.
			w.pollers.Add(1)
			w.runners.run(func() { w.pollActivities(slots) })
			for _, t := range tasks {
				w.startAttempt(t, release)
			}
			return
		}
		if err != nil {
			if w.pollCtx.Err() != nil {
				return
			}
			w.logPollError("poll activity tasks", err)
			bo.wait(w.pollCtx)
			continue
		}
		bo.reset()
	}
}

// pollWorkflowTasks long-polls for workflow tasks while a slot is free. The
// goroutine a task comes to runs it at once and hands the polling on to a
// new goroutine, as pollActivities does: the task does not wait behind the
// next poll's request.
func (w *Worker) pollWorkflowTasks(slots chan struct{}) {
	var bo backoff
	for {
		select {
		case slots <- struct{}{}:
		case <-w.pollCtx.Done():
			w.pollers.Done()
			return
		}
		resp, err := w.c.Service().PollWorkflowTask(w.pollCtx, &durablev1.PollWorkflowTaskRequest{
			TaskQueue: w.queue, Identity: w.opts.Identity, StickySession: w.session,
		})
		if len(resp.GetTaskToken()) > 0 {
			// Both Adds come while this goroutine still counts as a poller,
			// so neither races Stop, which waits for the pollers first.
			w.wfTasks.Add(1)
			w.pollers.Add(1)
			w.runners.run(func() { w.pollWorkflowTasks(slots) })
			w.pollers.Done()
			w.runWorkflowTask(resp)
			<-slots
			w.wfTasks.Done()
			return
		}
		<-slots
		if err != nil {
			if w.pollCtx.Err() != nil {
				w.pollers.Done()
				return
			}
			w.logPollError("poll workflow tasks", err)
			bo.wait(w.pollCtx)
			continue
		}
		bo.reset()
	}
}

// logPollError logs a failed poll. A daemon that refuses the worker's
// credentials is an error an operator must fix (the poll goes on, so that a
// corrected auth file, reloaded by the daemon, lets the worker in); anything
// else, such as a restarting daemon, is a warning.
func (w *Worker) logPollError(msg string, err error) {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied:
		w.log.Error(msg+": the daemon refused this worker's credentials; check its token or certificate and the daemon's auth file",
			"task_queue", w.queue, "err", err)
	default:
		w.log.Warn(msg, "err", err)
	}
}

// backoff spaces out retries of a failing poll: 100 ms doubling to 5 s, with
// jitter so that many workers do not come back at once.
type backoff struct{ n int }

func (b *backoff) reset() { b.n = 0 }

func (b *backoff) wait(ctx context.Context) {
	d := min(100*time.Millisecond<<min(b.n, 6), 5*time.Second)
	b.n++
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
