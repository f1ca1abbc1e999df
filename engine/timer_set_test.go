package engine

import (
	"math/rand/v2"
	"sort"
	"testing"
	"time"
)

// TestTimerSet_MatchesAModel drives a timerSet and a plain map with the same
// random sets, removals and pops, and checks they agree on what is due.
func TestTimerSet_MatchesAModel(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(7, 8))
	var s timerSet
	model := map[timerKey]Timer{}
	now := t0
	for step := range 20_000 {
		id := string(rune('a' + rng.IntN(20)))
		kind := TimerKind(1 + rng.IntN(3))
		switch rng.IntN(4) {
		case 0, 1:
			tm := Timer{Due: now.Add(time.Duration(rng.IntN(1000)) * time.Millisecond), Kind: kind, WorkflowID: "wf", ID: id}
			s.set(tm)
			model[keyOf(tm)] = tm
		case 2:
			s.removeActivity("wf", id)
			for _, k := range []TimerKind{ActivityLeaseTimer, ScheduleToStartTimer, ScheduleToCloseTimer} {
				delete(model, timerKey{k, "wf", id})
			}
		case 3:
			now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
			got := s.popDue(now, 1000)
			var want []Timer
			for k, tm := range model {
				if !tm.Due.After(now) {
					want = append(want, tm)
					delete(model, k)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("step %d: popped %d timers, want %d", step, len(got), len(want))
			}
			if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Due.Before(got[j].Due) }) {
				t.Fatalf("step %d: popped out of order", step)
			}
		}
		if s.len() != len(model) {
			t.Fatalf("step %d: %d timers, want %d", step, s.len(), len(model))
		}
	}
}
