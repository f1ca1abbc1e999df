package engine

import (
	"container/heap"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The engine keeps the queue and timer indexes of the store in memory as
// min-heaps (the timers in a timerSet), rebuilt from the records at start. The store's index keys stay
// the durable truth; the heaps only spare every poll and every tick a seek
// through an LSM range full of deleted entries, whose cost grows with the
// traffic. An entry is checked against its record when it is used, so a heap
// may hold entries that have since changed (they are skipped), never miss one.

type entryHeap []QueueEntry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if !h[i].Due.Equal(h[j].Due) {
		return h[i].Due.Before(h[j].Due)
	}
	return h[i].Seq < h[j].Seq
}
func (h entryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)   { *h = append(*h, x.(QueueEntry)) }
func (h *entryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (e *Engine) pushEntryLocked(q QueueEntry) {
	k := queueKey{q.Kind, q.Queue}
	h := e.queues[k]
	if h == nil {
		h = &entryHeap{}
		e.queues[k] = h
	}
	heap.Push(h, q)
}

// nextTimerLocked is the due time of the earliest timer, zero when none.
func (e *Engine) nextTimerLocked() time.Time { return e.timers.next() }

// rebuildIndex loads every queue entry and timer the records imply.
func (e *Engine) rebuildIndex(tx Tx) error {
	err := tx.ScanActivities(func(a *durablev1.ActivityRecord) bool {
		e.counts[countKey(a)]++
		e.bookLocked([]taskMove{{kind: ActivityTask, workflowID: a.GetInfo().GetWorkflowId(), activityID: a.GetInfo().GetActivityId(), to: activitySpot(a)}})
		if q, ok := QueueEntryOf(a); ok {
			e.pushEntryLocked(q)
		}
		for _, t := range e.timersOf(a) {
			e.timers.set(t)
		}
		return true
	})
	if err != nil {
		return err
	}
	err = eachWorkflow(tx, func(w *durablev1.WorkflowRecord) {
		if q, ok := WorkflowQueueEntryOf(w); ok {
			e.pushEntryLocked(q)
		}
		e.bookLocked([]taskMove{{kind: WorkflowTask, workflowID: w.GetInfo().GetWorkflowId(), to: workflowSpot(w)}})
		for _, t := range WorkflowTimersOf(w) {
			e.timers.set(t)
		}
	})
	if err != nil {
		return err
	}
	// Workflow timers have no record scan of their own: the timer index
	// holds them, read once here.
	all, err := tx.DueTimers(1 << 62)
	if err != nil {
		return err
	}
	for _, t := range all {
		if t.Kind == UserTimer {
			e.timers.set(t)
		}
	}
	return nil
}

// eachWorkflow calls fn for every workflow record, a page at a time.
func eachWorkflow(tx Tx, fn func(*durablev1.WorkflowRecord)) error {
	const page = 1000
	after := ""
	for {
		ws, err := tx.ListWorkflows(after, page)
		if err != nil {
			return err
		}
		for _, w := range ws {
			fn(w)
		}
		if len(ws) < page {
			return nil
		}
		after = ws[len(ws)-1].GetInfo().GetWorkflowId()
	}
}

// takeDue pops up to max due entries of a queue. It returns them and the due
// time of the first entry not yet due (zero when the queue is drained). The
// caller checks each against its record and drops the stale ones.
func (e *Engine) takeDue(k queueKey, now time.Time, max int) ([]QueueEntry, time.Time) {
	h := e.queues[k]
	var out []QueueEntry
	for h != nil && h.Len() > 0 && len(out) < max {
		top := (*h)[0]
		if top.Due.After(now) {
			return out, top.Due
		}
		heap.Pop(h)
		out = append(out, top)
	}
	return out, time.Time{}
}
