package engine

import (
	"sync"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Sticky execution: a worker that keeps the workflows it ran in a cache
// polls with a sticky session, and when the same session leases a
// workflow's next task it is sent only the events after the previous task's
// WorkflowTaskStarted instead of the whole history. Without it every task of
// a workflow that fans out to n activities carries O(n) events, O(n²) in
// all. The daemon remembers, in memory only, which session leased each
// workflow's last task and that task's Started event; anything it does not
// remember (a restart, a workflow it forgot to stay within stickyLimit)
// gets the whole history, which is always correct.

// stickyLimit bounds the workflows the daemon remembers a session for: about
// 100 bytes each. Past it the mark of an arbitrary workflow is forgotten, and
// that workflow's next task carries its whole history.
const stickyLimit = 1 << 16

// stickyMark says which session leased a workflow's last task and the event
// id of that task's WorkflowTaskStarted.
type stickyMark struct {
	session string
	started int64
}

// partialFrom is where the history of a task, whose WorkflowTaskStarted is
// started, may start for a poll of session, given the mark of the
// workflow's previous task: right after that task's Started when the same
// session leased it; 0 (the whole history) otherwise. Whether the previous
// task also completed is for continuesTask to say, from the events between.
func partialFrom(prev stickyMark, known bool, session string, started int64) int64 {
	if session == "" || !known || prev.session != session || prev.started <= 0 || prev.started >= started {
		return 0
	}
	return prev.started + 1
}

// continuesTask reports whether events (those after the previous task's
// WorkflowTaskStarted, through the current task's) show that the previous
// task completed and that the current task is the next one: the first
// workflow task event is WorkflowTaskCompleted, and the only
// WorkflowTaskStarted is the last event. A failed or timed-out task
// (WorkflowTaskFailed) or a gap means the worker's state may not be what
// the history says, so the whole history goes out instead.
func continuesTask(events []*durablev1.HistoryEvent, from, started int64) bool {
	if len(events) == 0 || events[0].GetEventId() != from || events[len(events)-1].GetEventId() != started ||
		int64(len(events)) != started-from+1 || events[len(events)-1].GetType() != evWorkflowTaskStarted {
		return false
	}
	completed := false
	for _, ev := range events[:len(events)-1] {
		switch ev.GetType() {
		case evWorkflowTaskCompleted:
			if completed {
				return false
			}
			completed = true
		case evWorkflowTaskFailed, evWorkflowTaskStarted:
			return false
		case evWorkflowTaskScheduled:
			if !completed {
				return false
			}
		}
	}
	return completed
}

// stickyMarks is the daemon's memory of which session leased each
// workflow's last task. It has its own lock: it is read and written on the
// workflow task path only, after the lease committed.
type stickyMarks struct {
	mu sync.Mutex
	m  map[string]stickyMark
}

// swap records the mark of a task just leased and returns the previous one.
// An empty session forgets the workflow.
func (s *stickyMarks) swap(workflowID string, mark stickyMark) (stickyMark, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.m[workflowID]
	if mark.session == "" {
		delete(s.m, workflowID)
		return prev, ok
	}
	if s.m == nil {
		s.m = map[string]stickyMark{}
	}
	if !ok && len(s.m) >= stickyLimit {
		for id := range s.m {
			delete(s.m, id)
			break
		}
	}
	s.m[workflowID] = mark
	return prev, ok
}

// forget drops a workflow's mark: it closed, or its task failed.
func (s *stickyMarks) forget(workflowID string) {
	s.mu.Lock()
	delete(s.m, workflowID)
	s.mu.Unlock()
}

// len is how many workflows have a mark.
func (s *stickyMarks) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
