package tui

import (
	"container/heap"
	"time"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// homeOrder keeps the home view in urgency order as time passes. Each row
// carries the urgency it was placed with, so the sorted set's order is a
// fixed total order; a row that becomes overdue with no event (its due time
// passes and nobody takes it) is re-placed when the clock passes
// client.OverdueFrom, found through a heap of those moments rather than a scan.
type homeOrder struct {
	key      sortKey
	hideDead bool
	now      time.Time
	rank     map[*durablev1.PendingActivity]urgency
	pending  promotions
}

// promotion is the moment a row becomes overdue. It is stale once the row
// is replaced by a newer version of its activity or removed.
type promotion struct {
	at  time.Time
	key string
	a   *durablev1.PendingActivity
}

type promotions []promotion

func (p promotions) Len() int           { return len(p) }
func (p promotions) Less(i, j int) bool { return p[i].at.Before(p[j].at) }
func (p promotions) Swap(i, j int)      { p[i], p[j] = p[j], p[i] }
func (p *promotions) Push(x any)        { *p = append(*p, x.(promotion)) }
func (p *promotions) Pop() any {
	old := *p
	x := old[len(old)-1]
	*p = old[:len(old)-1]
	return x
}

// less is the sorted set's order: rankedLess with the stored urgencies.
func (h *homeOrder) less(a, b *durablev1.PendingActivity) bool {
	return rankedLess(h.key, ranked{a, h.rank[a]}, ranked{b, h.rank[b]})
}

// place ranks a at the current time, before it goes into the set, and
// remembers when it will become overdue if it is not yet.
func (h *homeOrder) place(key string, a *durablev1.PendingActivity) {
	u := urgencyOf(a, h.now)
	h.rank[a] = u
	if u == urgencyOverdue {
		return
	}
	if at, ok := client.OverdueFrom(a); ok {
		heap.Push(&h.pending, promotion{at: at, key: key, a: a})
	}
}

// reset forgets every row, for a reload.
func (h *homeOrder) reset() {
	clear(h.rank)
	h.pending = h.pending[:0]
}

// due moves the clock to now and returns the promotions that fell due,
// stale ones included (the caller checks them against the set).
func (h *homeOrder) due(now time.Time) []promotion {
	if now.After(h.now) {
		h.now = now
	}
	var out []promotion
	for len(h.pending) > 0 && h.now.After(h.pending[0].at) {
		out = append(out, heap.Pop(&h.pending).(promotion))
	}
	return out
}

// stale reports whether the heap holds so many superseded promotions (every
// upsert adds one) that it should be rebuilt from the live rows.
func (h *homeOrder) stale(live int) bool {
	return len(h.pending) > 2*live+1024
}

// compact rebuilds the heap from the rows of set not yet overdue.
func (h *homeOrder) compact(set *sortedSet[*durablev1.PendingActivity]) {
	h.pending = h.pending[:0]
	for key, a := range set.byID {
		if h.rank[a] == urgencyOverdue {
			continue
		}
		if at, ok := client.OverdueFrom(a); ok {
			h.pending = append(h.pending, promotion{at: at, key: key, a: a})
		}
	}
	heap.Init(&h.pending)
}
