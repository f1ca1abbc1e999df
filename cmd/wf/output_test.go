package main

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestHuman(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{850 * time.Millisecond, "850ms"},
		{time.Second, "1s"},
		{3200 * time.Millisecond, "3.2s"},
		{42 * time.Second, "42s"},
		{4*time.Minute + 5*time.Second, "4m05s"},
		{2*time.Hour + 10*time.Minute, "2h10m"},
		{76 * time.Hour, "3d4h"},
		{-3 * time.Second, "3s"},
	}
	for _, tt := range tests {
		if got := human(tt.d); got != tt.want {
			t.Errorf("human(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestNext(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(d)) }
	tests := []struct {
		name string
		a    *durablev1.PendingActivity
		want string
	}{
		{"RetryLater", &durablev1.PendingActivity{State: durablev1.ActivityState_ACTIVITY_STATE_RETRYING, NextAttemptTime: at(3200 * time.Millisecond)}, "retry in 3.2s"},
		{"RetryOverdue", &durablev1.PendingActivity{State: durablev1.ActivityState_ACTIVITY_STATE_RETRYING, NextAttemptTime: at(-37 * time.Second)}, "retry due 37s ago, no worker yet"},
		{"RetryJustDue", &durablev1.PendingActivity{State: durablev1.ActivityState_ACTIVITY_STATE_RETRYING, NextAttemptTime: at(-300 * time.Millisecond)}, "waiting for a worker"},
		{"Queued", &durablev1.PendingActivity{State: durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, NextAttemptTime: at(-time.Second)}, "waiting for a worker"},
		{"QueuedOverdue", &durablev1.PendingActivity{State: durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, NextAttemptTime: at(-42 * time.Second)}, "due 42s ago, no worker yet"},
		{"RunsLater", &durablev1.PendingActivity{State: durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, NextAttemptTime: at(90 * time.Second)}, "runs in 1m30s"},
		{"Lease", &durablev1.PendingActivity{State: durablev1.ActivityState_ACTIVITY_STATE_STARTED, LeaseDeadline: at(28 * time.Second)}, "lease ends in 28s"},
		{"LeaseExpired", &durablev1.PendingActivity{State: durablev1.ActivityState_ACTIVITY_STATE_STARTED, LeaseDeadline: at(-400 * time.Millisecond)}, "lease expired 400ms ago"},
		{"Dead", &durablev1.PendingActivity{State: durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED, DeadLetteredTime: at(-90 * time.Second)}, "needs redrive (dead 1m30s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := next(tt.a, now); got != tt.want {
				t.Errorf("next = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPreview(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []byte
		max  int
		want string
	}{
		{nil, 10, ""},
		{[]byte("{ \"a\" : 1 }"), 20, `{"a":1}`},
		{[]byte("plain text"), 20, `"plain text"`},
		{[]byte{0xff, 0xfe}, 20, "<2 bytes>"},
		{[]byte(`{"next_index":200,"acc":{}}`), 10, `{"next_in…`},
	}
	for _, tt := range tests {
		if got := preview(tt.in, tt.max); got != tt.want {
			t.Errorf("preview(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

// TestPrintOperation_NamesItsNodeWhereNodesShareAStore: describe names the
// node that runs an operation, or ran one that finished, and has no such
// line on a store one daemon uses (no node).
func TestPrintOperation_NamesItsNodeWhereNodesShareAStore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	op := func(state durablev1.OperationState, node string) string {
		var b strings.Builder
		printOperation(&b, &durablev1.Operation{Id: "op-77003", Kind: "redrive", State: state, Node: node,
			Rate: 8, Matched: 10, StartedTime: timestamppb.New(now.Add(-time.Minute))}, now)
		return b.String()
	}
	running := durablev1.OperationState_OPERATION_STATE_RUNNING
	if got := lineWith(op(running, "node-2"), "Node:"); !strings.Contains(got, "node-2 (runs it; another node takes it over if this one is gone)") {
		t.Errorf("running: Node line %q", got)
	}
	if got := lineWith(op(durablev1.OperationState_OPERATION_STATE_COMPLETED, "node-2"), "Node:"); !strings.Contains(got, "node-2 (ran it)") {
		t.Errorf("completed: Node line %q", got)
	}
	if got := op(running, ""); strings.Contains(got, "Node:") {
		t.Errorf("no node, yet a Node line:\n%s", got)
	}
}
