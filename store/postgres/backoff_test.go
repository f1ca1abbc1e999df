package postgres

import (
	"testing"
	"time"
)

func TestConflictBackoff_DoublesFromAMillisecondUpToTheCap(t *testing.T) {
	whole := func(d time.Duration) time.Duration { return d }
	for _, c := range []struct {
		attempt int
		want    time.Duration
	}{
		{1, 2 * time.Millisecond},
		{2, 4 * time.Millisecond},
		{6, 64 * time.Millisecond},
		{7, 100 * time.Millisecond},
		{19, 100 * time.Millisecond},
		{1000, 100 * time.Millisecond},
	} {
		if got := conflictBackoff(c.attempt, whole); got != c.want {
			t.Errorf("conflictBackoff(%d) at the top of its range = %v, want %v", c.attempt, got, c.want)
		}
	}
	var total time.Duration
	for a := 1; a < maxAttempts; a++ {
		total += conflictBackoff(a, whole)
	}
	if total > 2*time.Second {
		t.Errorf("a transaction that loses every conflict waits up to %v in all, want under 2s (a workflow task's lease is 10s)", total)
	}
}

func TestFullJitter_StaysBelowItsBound(t *testing.T) {
	if got := fullJitter(0); got != 0 {
		t.Errorf("fullJitter(0) = %v, want 0", got)
	}
	for range 1000 {
		if got := fullJitter(5 * time.Millisecond); got < 0 || got >= 5*time.Millisecond {
			t.Fatalf("fullJitter(5ms) = %v, want in [0, 5ms)", got)
		}
	}
}
