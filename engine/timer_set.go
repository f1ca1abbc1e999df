package engine

import (
	"container/heap"
	"time"
)

// timerSet holds at most one timer per (kind, workflow, id), earliest due
// first. Setting a timer that exists moves it, and an activity that finishes
// takes its timers out, so the set holds live timers only: lazy deletion
// would keep every finished activity's lease timer until its start-to-close
// deadline, which at thousands of activities a second is millions of them.
type timerSet struct {
	items []*timerItem
	byKey map[timerKey]*timerItem
}

type timerKey struct {
	kind TimerKind
	wf   string
	id   string
}

type timerItem struct {
	t     Timer
	index int
}

func keyOf(t Timer) timerKey { return timerKey{t.Kind, t.WorkflowID, t.ID} }

// set adds t, or moves the timer of the same kind and ids to t's due time.
func (s *timerSet) set(t Timer) {
	if s.byKey == nil {
		s.byKey = map[timerKey]*timerItem{}
	}
	if it, ok := s.byKey[keyOf(t)]; ok {
		it.t = t
		heap.Fix((*timerItems)(&s.items), it.index)
		return
	}
	it := &timerItem{t: t}
	heap.Push((*timerItems)(&s.items), it)
	s.byKey[keyOf(t)] = it
}

// restore puts back a timer taken by popDue whose firing failed, unless a
// newer one of the same kind and ids was set meanwhile.
func (s *timerSet) restore(t Timer) {
	if _, ok := s.byKey[keyOf(t)]; !ok {
		s.set(t)
	}
}

// remove takes out the timer of that kind and ids, if there is one.
func (s *timerSet) remove(kind TimerKind, workflowID, id string) {
	if it, ok := s.byKey[timerKey{kind, workflowID, id}]; ok {
		heap.Remove((*timerItems)(&s.items), it.index)
		delete(s.byKey, it.key())
	}
}

// removeActivity takes out every timer of one activity.
func (s *timerSet) removeActivity(workflowID, activityID string) {
	for _, k := range []TimerKind{ActivityLeaseTimer, ScheduleToStartTimer, ScheduleToCloseTimer} {
		s.remove(k, workflowID, activityID)
	}
}

// next is the earliest due time, zero when the set is empty.
func (s *timerSet) next() time.Time {
	if len(s.items) == 0 {
		return time.Time{}
	}
	return s.items[0].t.Due
}

// popDue takes out up to max timers due at now, earliest first.
func (s *timerSet) popDue(now time.Time, max int) []Timer {
	var out []Timer
	for len(s.items) > 0 && !s.items[0].t.Due.After(now) && len(out) < max {
		it := heap.Pop((*timerItems)(&s.items)).(*timerItem)
		delete(s.byKey, it.key())
		out = append(out, it.t)
	}
	return out
}

func (s *timerSet) len() int { return len(s.items) }

func (it *timerItem) key() timerKey { return keyOf(it.t) }

// timerItems is the heap.Interface over the set's items.
type timerItems []*timerItem

func (h timerItems) Len() int           { return len(h) }
func (h timerItems) Less(i, j int) bool { return h[i].t.Due.Before(h[j].t.Due) }
func (h timerItems) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerItems) Push(x any) {
	it := x.(*timerItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *timerItems) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
