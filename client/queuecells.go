package client

import (
	"fmt"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The words of a task queue's row, as `wf queues` and the console's queues
// view both write them.

// PollersText is "2 (1 parked)": the pollers listed and how many have a poll
// parked now; "0" when there are none.
func PollersText(q *durablev1.TaskQueue) string {
	n, parked := len(q.GetPollers()), 0
	for _, p := range q.GetPollers() {
		if p.GetParked() {
			parked++
		}
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%d parked)", n, parked)
}

// BacklogText is the ready tasks, and "+N later" for those still in their
// backoff.
func BacklogText(b *durablev1.TaskBacklog) string {
	s := fmt.Sprint(b.GetReady())
	if b.GetLater() > 0 {
		s += fmt.Sprintf(" +%d later", b.GetLater())
	}
	return s
}

// LeaseCount is the activity attempts leased out on q, over every worker.
func LeaseCount(q *durablev1.TaskQueue) int64 {
	var n int64
	for _, l := range q.GetLeases() {
		n += l.GetActivities()
	}
	return n
}

// LeasesText is "7 (3 workers)"; "0" when nothing is leased.
func LeasesText(q *durablev1.TaskQueue) string {
	n := LeaseCount(q)
	if n == 0 {
		return "0"
	}
	workers := "workers"
	if len(q.GetLeases()) == 1 {
		workers = "worker"
	}
	return fmt.Sprintf("%d (%d %s)", n, len(q.GetLeases()), workers)
}

// QueueStatus is the daemon's verdict on q: "no poller" when ready work has
// no live poller of its kind (naming the kind when only one lacks one),
// "busy" when work is ready or leased, "idle" otherwise.
func QueueStatus(q *durablev1.TaskQueue) string {
	wf, act := q.GetWorkflowTasks().GetStalled(), q.GetActivityTasks().GetStalled()
	switch {
	case wf && act:
		return "no poller"
	case wf:
		return "no poller (workflow tasks)"
	case act:
		return "no poller (activities)"
	case q.GetStalled():
		return "no poller"
	}
	if q.GetWorkflowTasks().GetReady() > 0 || q.GetActivityTasks().GetReady() > 0 || len(q.GetLeases()) > 0 {
		return "busy"
	}
	return "idle"
}

// OldestReady is when the oldest ready task of q, of either kind, became
// ready; ok is false when nothing is ready.
func OldestReady(q *durablev1.TaskQueue) (t time.Time, ok bool) {
	for _, b := range []*durablev1.TaskBacklog{q.GetWorkflowTasks(), q.GetActivityTasks()} {
		if o := b.GetOldestReadyTime(); o != nil && (!ok || o.AsTime().Before(t)) {
			t, ok = o.AsTime(), true
		}
	}
	return t, ok
}
