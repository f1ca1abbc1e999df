package engine

import (
	"container/heap"
	"time"
)

// The engine keeps the queue and timer indexes of the store in memory as
// min-heaps (the timers in a timerSet), the part of them due within its
// window (horizon.go), rebuilt from the store at start. The store's index keys stay
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

// pushEntryLocked queues an entry, unless it falls beyond the window (the
// store's index holds it, and a refill brings it in, see horizon.go). It
// reports whether it queued it.
func (e *Engine) pushEntryLocked(q QueueEntry) bool {
	if !keepEntry(q.Kind, q.Due, e.horizon) {
		return false
	}
	k := queueKey{q.Kind, q.Queue}
	h := e.queues[k]
	if h == nil {
		h = &entryHeap{}
		e.queues[k] = h
	}
	heap.Push(h, q)
	return true
}

// nextTimerLocked is the due time of the earliest timer, zero when none.
func (e *Engine) nextTimerLocked() time.Time { return e.timers.next() }

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
	if h != nil {
		h.shrink()
	}
	return out, time.Time{}
}

// shrink gives back the array of a heap that a burst of due tasks grew
// and polls have since drained to a quarter of it: a slice never shrinks
// by itself, and a million tasks leave 88 MB behind.
func (h *entryHeap) shrink() {
	if c := cap(*h); c > 1024 && len(*h) < c/4 {
		*h = append(make(entryHeap, 0, 2*len(*h)), *h...)
	}
}
