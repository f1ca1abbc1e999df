package engine

import (
	"testing"
	"time"
)

// TestMergePollers: a worker seen by several nodes is one poller, parked
// if a poll of it is open on any, last polled at its latest poll on any;
// the workers only another node saw are added.
func TestMergePollers(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	own := []PollerState{
		{Queue: "q", Kind: ActivityTask, Identity: "w1", Parked: false, Last: t0},
		{Queue: "q", Kind: WorkflowTask, Identity: "w1", Parked: true, Last: t0},
	}
	others := []PollerState{
		{Queue: "q", Kind: ActivityTask, Identity: "w1", Parked: true, Last: t0.Add(-time.Second)},
		{Queue: "q", Kind: WorkflowTask, Identity: "w1", Parked: false, Last: t0.Add(time.Second)},
		{Queue: "q", Kind: ActivityTask, Identity: "w2", Parked: true, Last: t0.Add(2 * time.Second)},
	}
	got := mergePollers(own, others)
	want := []PollerState{
		{Queue: "q", Kind: ActivityTask, Identity: "w1", Parked: true, Last: t0},
		{Queue: "q", Kind: WorkflowTask, Identity: "w1", Parked: true, Last: t0.Add(time.Second)},
		{Queue: "q", Kind: ActivityTask, Identity: "w2", Parked: true, Last: t0.Add(2 * time.Second)},
	}
	if len(got) != len(want) {
		t.Fatalf("merged %d pollers, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("poller %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := mergePollers(own[:1], nil); len(got) != 1 || got[0] != own[0] {
		t.Errorf("with no other node: %+v", got)
	}
}
