package engine

import (
	"testing"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestPace(t *testing.T) {
	t.Parallel()
	origin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		p    pace
		at   time.Duration
		want int64
	}{
		{"FirstAtOrigin", pace{origin: origin, rate: 10, total: 25}, 0, 1},
		{"NotBeforeOrigin", pace{origin: origin, base: 4, rate: 10, total: 25}, -time.Second, 4},
		{"JustBeforeSecond", pace{origin: origin, rate: 10, total: 25}, 99 * time.Millisecond, 1},
		{"Second", pace{origin: origin, rate: 10, total: 25}, 100 * time.Millisecond, 2},
		{"OneSecond", pace{origin: origin, rate: 10, total: 25}, time.Second, 11},
		{"NeverPastTotal", pace{origin: origin, rate: 10, total: 25}, time.Hour, 25},
		{"ResumedFromBase", pace{origin: origin, base: 150, rate: 50, total: 300}, time.Second, 201},
		{"SlowerThanOnePerSecond", pace{origin: origin, rate: 0.5, total: 3}, 1999 * time.Millisecond, 1},
		{"SlowerThanOnePerSecondDue", pace{origin: origin, rate: 0.5, total: 3}, 2 * time.Second, 2},
		{"EmptyList", pace{origin: origin, rate: 50}, time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.due(origin.Add(tt.at)); got != tt.want {
				t.Errorf("due(+%v) = %d, want %d", tt.at, got, tt.want)
			}
		})
	}
}

// TestPace_AtIsWhenDueCountsTheItem: for rates whose period is no whole
// number of nanoseconds too, item i is due at at(i), so that the releaser
// never wakes to find nothing to do, and at(i) is no later than the item's
// exact due time rounded up.
func TestPace_AtIsWhenDueCountsTheItem(t *testing.T) {
	t.Parallel()
	origin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, rate := range []float64{3, 7, 50, 333, 500, 0.3, 100000} {
		p := pace{origin: origin, base: 5, rate: rate, total: 5000}
		for i := p.base; i < p.total; i++ {
			at := p.at(i)
			if p.due(at) < i+1 {
				t.Fatalf("rate %v: item %d not due at at(%d) = +%v", rate, i, i, at.Sub(origin))
			}
			if exact := float64(i-p.base) / rate * 1e9; float64(at.Sub(origin)) > exact+1 {
				t.Fatalf("rate %v: at(%d) = +%v, later than the item's due time +%vns", rate, i, at.Sub(origin), exact)
			}
		}
	}
}

func TestOperationSeq(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]int64{"op-1": 1, "op-42": 42, "op-9223372036854775807": 1<<63 - 1} {
		if got, ok := operationSeq(id); !ok || got != want || OperationID(got) != id {
			t.Errorf("operationSeq(%q) = %d, %v; want %d", id, got, ok, want)
		}
	}
	for _, id := range []string{"", "op-", "op-0", "op--1", "op-01", "op-+1", "op-1x", "OP-1", "42", "op-99999999999999999999"} {
		if _, ok := operationSeq(id); ok {
			t.Errorf("operationSeq(%q) accepted", id)
		}
	}
}

func TestAdvanceAndCancel(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	newRecord := func() *durablev1.OperationRecord {
		return &durablev1.OperationRecord{Seq: 3, Operation: &durablev1.Operation{Id: "op-3", State: opRunning, Matched: 3, Left: 3}}
	}
	r := newRecord()
	advance(r, released, now)
	advance(r, skipped, now)
	if op := r.GetOperation(); r.GetNext() != 2 || op.GetReleased() != 1 || op.GetSkipped() != 1 || op.GetLeft() != 1 || op.GetState() != opRunning {
		t.Fatalf("after two items: next %d, %v", r.GetNext(), op)
	}
	advance(r, released, now.Add(time.Second))
	if op := r.GetOperation(); op.GetState() != opCompleted || op.GetLeft() != 0 || !op.GetFinishedTime().AsTime().Equal(now.Add(time.Second)) {
		t.Fatalf("after the last item: %v", op)
	}
	if err := cancel(r, Actor{Principal: "alice"}, "why", now); err == nil {
		t.Error("cancel of a completed operation succeeded")
	}

	r = newRecord()
	advance(r, released, now)
	if err := cancel(r, Actor{Principal: "alice"}, "INC-7 worse", now); err != nil {
		t.Fatal(err)
	}
	if op := r.GetOperation(); op.GetState() != opCancelled || op.GetLeft() != 2 || op.GetCancelledBy() != "alice" || op.GetCancelReason() != "INC-7 worse" {
		t.Errorf("cancelled: %v", op)
	}
	r.Operation.State = opPreparing
	if err := cancel(r, Actor{}, "", now); err == nil {
		t.Error("cancel of an operation being prepared succeeded")
	}
}
