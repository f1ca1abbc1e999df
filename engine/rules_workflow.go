package engine

import (
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The rules of a workflow and its workflow tasks. Pure functions: see
// rules.go.

// scheduleWorkflowTask makes sure the workflow code runs again: it
// schedules a task due now, leaves a scheduled one alone, or marks a running
// one dirty so that another follows it. A closed workflow runs no more.
func (s *step) scheduleWorkflowTask(w *durablev1.WorkflowRecord, now time.Time, env *ruleEnv) {
	if w.GetInfo().GetStatus() != statusRunning {
		return
	}
	switch w.GetWtState() {
	case wtScheduled:
		return
	case wtStarted:
		w.WtDirty = true
		return
	}
	w.WtState = wtScheduled
	w.WtAttempt = 1
	w.WtDue = ts(now)
	w.WtSeq = env.NextIDFunc()
	w.WtDirty = false
	s.record(w, now, &durablev1.HistoryEvent{Type: evWorkflowTaskScheduled, TaskQueue: w.GetInfo().GetTaskQueue()})
	q, _ := WorkflowQueueEntryOf(w)
	s.effect(effect{kind: effEnqueue, entry: q})
}
