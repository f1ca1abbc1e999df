package engine

import (
	"container/heap"
	"testing"
	"time"
)

func TestDueAmong_CountsTheEntriesDueAndFindsTheNext(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return t0i.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name     string
		dues     []int // seconds after t0i
		limit    int
		wantN    int
		wantNext time.Time
	}{
		{"Empty", nil, 8, 0, time.Time{}},
		{"NoneDue", []int{5, 3, 9}, 8, 0, at(3)},
		{"SomeDue", []int{-1, 0, 4, 2, -3, 7}, 8, 3, at(2)},
		{"AllDue", []int{-1, 0, -2}, 8, 3, time.Time{}},
		{"StopsAtTheLimit", []int{-1, -2, -3, -4, 1}, 2, 2, time.Time{}},
		{"AsManyDueAsTheLimit", []int{-1, -2, 1}, 2, 2, time.Time{}},
	}
	for _, tt := range tests {
		var h entryHeap
		for i, s := range tt.dues {
			heap.Push(&h, QueueEntry{Due: at(s), Seq: int64(i)})
		}
		n, next := dueAmong(h, t0i, tt.limit)
		if n != tt.wantN || !next.Equal(tt.wantNext) {
			t.Errorf("%s: dueAmong = %d, %v; want %d, %v", tt.name, n, next, tt.wantN, tt.wantNext)
		}
	}
}

// A queue's alarm wakes one parked poll for each entry that fell due,
// oldest first, and sets itself for the next entry while polls stay parked.
func TestQueueAlarm_WakesAPollPerEntryDueAndSetsItselfForTheNext(t *testing.T) {
	t.Parallel()
	clock := NewFakeClock(t0i)
	e := &Engine{clock: clock, closeCh: make(chan struct{}), waiters: map[queueKey][]*waiter{},
		queues: map[queueKey]*entryHeap{}, alarms: map[queueKey]time.Time{}, horizon: t0i.Add(time.Hour)}
	e.rt = &embedded{e: e}
	defer close(e.closeCh)
	k := queueKey{ActivityTask, "q"}
	polls := []*waiter{{ch: make(chan struct{})}, {ch: make(chan struct{})}, {ch: make(chan struct{})}}
	e.waiters[k] = append([]*waiter(nil), polls...)
	first, second := t0i.Add(time.Second), t0i.Add(3*time.Second)
	e.mu.Lock()
	for i, due := range []time.Time{first, second} {
		e.pushEntryLocked(QueueEntry{Kind: ActivityTask, Queue: "q", Due: due, Seq: int64(i)})
		e.armLocked(k, due)
	}
	if got := e.alarms[k]; !got.Equal(first) {
		t.Errorf("alarm set for %v, want the earliest entry's %v", got, first)
	}
	e.mu.Unlock()

	woken := func() (n int) {
		for _, w := range polls {
			select {
			case <-w.ch:
				n++
			default:
			}
		}
		return n
	}
	if n := woken(); n != 0 {
		t.Fatalf("%d polls woken before anything fell due", n)
	}
	// The alarm's goroutine reads the clock, then waits: moved between the
	// two, the clock would leave it waiting a second past the new time.
	deadline := time.Now().Add(10 * time.Second)
	for clock.Waiters() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	clock.Set(first)
	for woken() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	e.mu.Lock()
	next, parked := e.alarms[k], len(e.waiters[k])
	e.mu.Unlock()
	if n := woken(); n != 1 {
		t.Errorf("%d polls woken when one entry fell due, want 1", n)
	}
	select {
	case <-polls[0].ch:
	default:
		t.Errorf("the oldest poll was not the one woken")
	}
	if parked != 2 || !next.Equal(second) {
		t.Errorf("after the first entry: %d polls parked, alarm at %v; want 2 and %v", parked, next, second)
	}
}
