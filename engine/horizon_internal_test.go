package engine

import (
	"testing"
	"time"
)

func TestKeepTimer_WindowedKindsOnlyWithinTheHorizon(t *testing.T) {
	t.Parallel()
	h := t0i.Add(time.Minute)
	tests := []struct {
		name      string
		kind      TimerKind
		due       time.Time
		overrides bool
		want      bool
	}{
		{"BudgetWithin", ScheduleToCloseTimer, h.Add(-time.Nanosecond), false, true},
		{"BudgetAtTheHorizon", ScheduleToCloseTimer, h, false, false},
		{"BudgetBeyond", ScheduleToCloseTimer, h.Add(time.Hour), false, false},
		{"StartBeyond", ScheduleToStartTimer, h.Add(time.Hour), false, false},
		{"UserBeyond", UserTimer, h.Add(time.Hour), false, false},
		{"LeaseBeyond", ActivityLeaseTimer, h.Add(time.Hour), false, true},
		{"WorkflowLeaseBeyond", WorkflowTaskLeaseTimer, h.Add(time.Hour), false, true},
		{"BudgetBeyondUnderAnOverride", ScheduleToCloseTimer, h.Add(time.Hour), true, true},
	}
	for _, tt := range tests {
		if got := keepTimer(Timer{Kind: tt.kind, Due: tt.due}, h, tt.overrides); got != tt.want {
			t.Errorf("%s: keepTimer = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestKeepEntry_ActivityTasksOnlyWithinTheHorizon(t *testing.T) {
	t.Parallel()
	h := t0i.Add(time.Minute)
	tests := []struct {
		name string
		kind TaskKind
		due  time.Time
		want bool
	}{
		{"ActivityDueNow", ActivityTask, t0i, true},
		{"ActivityAtTheHorizon", ActivityTask, h, false},
		{"ActivityHoursAway", ActivityTask, h.Add(3 * time.Hour), false},
		{"WorkflowHoursAway", WorkflowTask, h.Add(3 * time.Hour), true},
	}
	for _, tt := range tests {
		if got := keepEntry(tt.kind, tt.due, h); got != tt.want {
			t.Errorf("%s: keepEntry = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRefillDue_WithinHalfAWindowOfTheHorizon(t *testing.T) {
	t.Parallel()
	clock := NewFakeClock(t0i)
	const window = 2 * time.Minute
	horizon := clock.Now().Add(window)
	steps := []struct {
		advance time.Duration
		want    bool
	}{
		{0, false},
		{59 * time.Second, false},
		{time.Second, true}, // half a window before the horizon
		{time.Hour, true},   // long past it
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		if got := refillDue(clock.Now(), horizon, window); got != s.want {
			t.Errorf("step %d (%s after start): refillDue = %v, want %v", i, clock.Now().Sub(t0i), got, s.want)
		}
	}
	if at := refillAt(horizon, window); !at.Equal(t0i.Add(time.Minute)) {
		t.Errorf("refillAt = %s after start, want 1m", at.Sub(t0i))
	}
}

var t0i = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestEntryHeapShrinksOnceDrainedToAQuarter(t *testing.T) {
	t.Parallel()
	h := make(entryHeap, 0, 100_000)
	for i := range 30_000 {
		h = append(h, QueueEntry{Seq: int64(i)})
	}
	h.shrink()
	if cap(h) != 100_000 {
		t.Errorf("a heap at 30%% of its array shrank to %d", cap(h))
	}
	h = h[:20_000]
	h.shrink()
	if cap(h) != 40_000 || len(h) != 20_000 || h[19_999].Seq != 19_999 {
		t.Errorf("a heap at 20%% of its array: len %d cap %d, want 20000 and 40000 with its entries", len(h), cap(h))
	}
	small := make(entryHeap, 1, 1000)
	small.shrink()
	if cap(small) != 1000 {
		t.Errorf("a small heap shrank to %d", cap(small))
	}
}
