package tui

import (
	"container/heap"
	"slices"
	"strings"
	"time"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// queues is the daemon's last list of task queues (WatchEvent.task_queues
// replaces it whole), in the order the queues screen shows: a queue with
// ready work and no poller first, then by name.
type queues struct {
	list []*durablev1.TaskQueue
	// known: the daemon sent a list (one that does not report its queues
	// never does), so that nopoller can follow its rule.
	known bool
}

// set replaces the list.
func (q *queues) set(list []*durablev1.TaskQueue) {
	q.list, q.known = slices.Clone(list), true
	slices.SortStableFunc(q.list, func(a, b *durablev1.TaskQueue) int {
		if a.GetStalled() != b.GetStalled() {
			if a.GetStalled() {
				return -1
			}
			return 1
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
}

// stalledWorkflowTasks are the home view's rows for workflows whose
// workflow task waits on a queue nobody polls. Such a row is a
// PendingActivity with no activity id (no real activity has one), so it
// sorts, moves its cursor and ranks (urgencyOf) with the activities.
//
// The rows are derived when a workflow changes, when the queue list
// changes and when the clock passes the grace of a waiting task, never on a
// render: waiting holds the workflows whose workflow task is due, few at a
// time.
type stalledWorkflowTasks struct {
	// waiting are the running workflows with a workflow task due, by id.
	waiting map[string]*durablev1.WorkflowInfo
	// rows are the rows in the home view, by workflow id.
	rows map[string]*durablev1.PendingActivity
	// soon are the workflows on a queue without a poller whose wait has not
	// yet passed the grace, by when it will.
	soon promotions
}

func newStalledWorkflowTasks() stalledWorkflowTasks {
	return stalledWorkflowTasks{
		waiting: make(map[string]*durablev1.WorkflowInfo),
		rows:    make(map[string]*durablev1.PendingActivity),
	}
}

// isWorkflowTask reports whether a home row is a stalled workflow task
// rather than an activity.
func isWorkflowTask(a *durablev1.PendingActivity) bool { return a.GetActivityId() == "" }

// workflowTaskRow is the home row of a workflow whose task waits since
// wait.Since: due then, so its countdown reads "overdue" as an activity's
// does.
func workflowTaskRow(w *durablev1.WorkflowInfo) *durablev1.PendingActivity {
	ready := w.GetWorkflowTaskReadyTime()
	return &durablev1.PendingActivity{
		WorkflowId:      w.GetWorkflowId(),
		TaskQueue:       w.GetTaskQueue(),
		State:           durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED,
		Attempt:         w.GetWorkflowTaskAttempt(),
		ScheduledTime:   ready,
		NextAttemptTime: ready,
	}
}

// putQueues replaces the queue list and re-derives every waiting
// workflow's row.
func (s *state) putQueues(list []*durablev1.TaskQueue) {
	s.queues.set(list)
	if s.attempts.filter.sel.NoPoller {
		// Whether a due activity has a poller is the queue list's to say.
		s.refilterActivities(false, s.attempts.filter)
	}
	for _, w := range s.wfTasks.waiting {
		s.deriveWorkflowTask(w)
	}
}

// trackWorkflowTask notes a workflow's new version: whether its workflow
// task is due, and so whether it has a row.
func (s *state) trackWorkflowTask(w *durablev1.WorkflowInfo) {
	if _, ok := client.WorkflowWait(w, nil); ok {
		s.wfTasks.waiting[w.GetWorkflowId()] = w
	} else {
		delete(s.wfTasks.waiting, w.GetWorkflowId())
	}
	s.deriveWorkflowTask(w)
}

// deriveWorkflowTask puts, replaces or removes w's row: shown once its task
// has waited more than client.NoPollerAfter on a queue without a poller for it
// (client.WorkflowWait says which), as of the home view's clock.
func (s *state) deriveWorkflowTask(w *durablev1.WorkflowInfo) {
	id := w.GetWorkflowId()
	wait, ok := client.WorkflowWait(w, s.queues.list)
	old := s.wfTasks.rows[id]
	key := activityKey(id, "")
	if !ok || !wait.NoPoller {
		if old != nil {
			delete(s.wfTasks.rows, id)
			s.attempts.put(key, old, nil, s.now)
		}
		return
	}
	if from := wait.Since.Add(client.NoPollerAfter); !s.attempts.home.now.After(from) {
		if old != nil {
			delete(s.wfTasks.rows, id)
			s.attempts.put(key, old, nil, s.now)
		}
		heap.Push(&s.wfTasks.soon, promotion{at: from, key: id})
		return
	}
	if old != nil && old.GetNextAttemptTime().AsTime().Equal(wait.Since) && old.GetAttempt() == w.GetWorkflowTaskAttempt() {
		return
	}
	row := workflowTaskRow(w)
	s.wfTasks.rows[id] = row
	s.attempts.put(key, old, row, s.now)
}

// advanceWorkflowTasks shows the rows whose wait passed the grace by now.
func (s *state) advanceWorkflowTasks(now time.Time) {
	for len(s.wfTasks.soon) > 0 && now.After(s.wfTasks.soon[0].at) {
		p := heap.Pop(&s.wfTasks.soon).(promotion)
		if w, ok := s.wfTasks.waiting[p.key]; ok {
			s.deriveWorkflowTask(w)
		}
	}
}

// reloadWorkflowTasks re-derives every row after the workflows were
// replaced (a snapshot).
func (s *state) reloadWorkflowTasks() {
	for id, row := range s.wfTasks.rows {
		s.attempts.put(activityKey(id, ""), row, nil, s.now)
	}
	s.wfTasks = newStalledWorkflowTasks()
	for _, w := range s.wfs {
		s.trackWorkflowTask(w)
	}
}

// workflowTaskWait is what the row of workflow id says it waits on.
func (s *state) workflowTaskWait(id string) (client.Wait, bool) {
	w, ok := s.wfs[id]
	if !ok {
		return client.Wait{}, false
	}
	return client.WorkflowWait(w, s.queues.list)
}

// queueOf is the queue named name in the last list, nil if it is not there.
func (s *state) queueOf(name string) *durablev1.TaskQueue {
	return client.FindQueue(s.queues.list, name)
}

// stalledOn are the rows of the workflow tasks stalled on queue name, the
// longest waiting first.
func (s *state) stalledOn(name string) []*durablev1.PendingActivity {
	var out []*durablev1.PendingActivity
	for _, row := range s.wfTasks.rows {
		if row.GetTaskQueue() == name {
			out = append(out, row)
		}
	}
	slices.SortFunc(out, func(a, b *durablev1.PendingActivity) int {
		if c := a.GetNextAttemptTime().AsTime().Compare(b.GetNextAttemptTime().AsTime()); c != 0 {
			return c
		}
		return strings.Compare(a.GetWorkflowId(), b.GetWorkflowId())
	})
	return out
}
