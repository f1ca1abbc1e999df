package client

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TaskQueues returns every task queue the daemon knows of (only the one
// named, when name is not empty), by name, and the daemon's clock when it
// made the list: who polls it, what waits in it and who holds its leases.
func (c *Client) TaskQueues(ctx context.Context, name string) ([]*durablev1.TaskQueue, time.Time, error) {
	resp, err := c.svc.ListTaskQueues(ctx, &durablev1.ListTaskQueuesRequest{TaskQueue: name})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("task queues: %w", err)
	}
	return resp.GetTaskQueues(), resp.GetServerTime().AsTime(), nil
}

// FindQueue returns the queue named name in queues, nil if it is not there
// (the daemon lists a queue only while it has work, leases or pollers).
func FindQueue(queues []*durablev1.TaskQueue, name string) *durablev1.TaskQueue {
	for _, q := range queues {
		if q.GetName() == name {
			return q
		}
	}
	return nil
}

// Wait is what a workflow or an activity waits on in a task queue.
type Wait struct {
	// What waits: "workflow task" or "activity <id>".
	What string
	// Queue is the task queue it waits in.
	Queue string
	// Since is when it became due.
	Since time.Time
	// NoPoller: no worker polls the queue for this kind of task, so it
	// will wait until one does.
	NoPoller bool
	// Pollers is how many workers poll the queue for this kind of task.
	Pollers int
}

// String says it the way wf and wfui show it, e.g. "workflow task waiting
// 5.9s on queue orders, no poller".
func (w Wait) String(now time.Time) string {
	s := fmt.Sprintf("%s waiting %s on queue %s", w.What, waitSpan(now.Sub(w.Since)), activity.EscapeID(w.Queue))
	if w.NoPoller {
		return s + ", no poller"
	}
	return s
}

// waitSpan formats a wait as wf writes spans: 850ms, 5.9s, 42s, 4m05s,
// 2h10m.
func waitSpan(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// WorkflowWait reports what a running workflow waits on when its workflow
// task is queued for a worker, with whether its queue has a poller for
// workflow tasks. queues is the daemon's list (ListTaskQueues or the
// Watch's task_queues); a queue missing from it, or an empty list, means
// nobody polls it. ok is false when the workflow waits on no queue (it is
// closed, or a worker runs its task, or it waits on its activities or
// timers).
func WorkflowWait(wf *durablev1.WorkflowInfo, queues []*durablev1.TaskQueue) (w Wait, ok bool) {
	if wf.GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING || wf.GetWorkflowTaskReadyTime() == nil {
		return Wait{}, false
	}
	w = Wait{What: "workflow task", Queue: wf.GetTaskQueue(), Since: wf.GetWorkflowTaskReadyTime().AsTime()}
	q := FindQueue(queues, w.Queue)
	w.Pollers = pollersOf(q, durablev1.TaskKind_TASK_KIND_WORKFLOW)
	w.NoPoller = q == nil || q.GetWorkflowTasks().GetStalled() || w.Pollers == 0
	return w, true
}

// ActivityWait reports what a pending activity waits on when it is due
// and queued for a worker (scheduled, or retrying with its backoff over:
// NextDue or NextOverdue, with its due time known). ok is false when it
// runs, is dead-lettered or waits for its backoff.
func ActivityWait(a *durablev1.PendingActivity, queues []*durablev1.TaskQueue, now time.Time) (w Wait, ok bool) {
	n := NextOf(a, now)
	if (n.Kind != NextDue && n.Kind != NextOverdue) || n.At.IsZero() {
		return Wait{}, false
	}
	w = Wait{What: "activity " + activity.EscapeID(a.GetActivityId()), Queue: a.GetTaskQueue(), Since: n.At}
	q := FindQueue(queues, w.Queue)
	w.Pollers = pollersOf(q, durablev1.TaskKind_TASK_KIND_ACTIVITY)
	w.NoPoller = q == nil || q.GetActivityTasks().GetStalled() || w.Pollers == 0
	return w, true
}

func pollersOf(q *durablev1.TaskQueue, kind durablev1.TaskKind) int {
	n := 0
	for _, p := range q.GetPollers() {
		if p.GetKind() == kind {
			n++
		}
	}
	return n
}
