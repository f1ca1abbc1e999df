package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// attempt runs workflow wf's one activity for d, completes it and then the
// workflow, so that the next workflow's task is the next in the queue.
func (h *harness) attempt(wf string, opts *durablev1.ActivityOptions, d time.Duration) {
	h.t.Helper()
	ctx := context.Background()
	h.startWithActivity(wf, opts)
	task := h.pollActivity()
	h.clock.Advance(d)
	if _, err := h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()}); err != nil {
		h.t.Fatal(err)
	}
	_, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: h.pollWorkflow().GetTaskToken(), Commands: []*durablev1.Command{
		{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW},
	}})
	if err != nil {
		h.t.Fatal(err)
	}
}

// stats lists activity stats since the given time (zero: all).
func (h *harness) stats(since time.Time) []*durablev1.ActivityTypeStats {
	h.t.Helper()
	req := &durablev1.ListActivityStatsRequest{}
	if !since.IsZero() {
		req.Since = timestamppb.New(since)
	}
	r, err := h.e.ListActivityStats(context.Background(), req)
	if err != nil {
		h.t.Fatal(err)
	}
	return r.GetStats()
}

// TestStatsWindowCountsTheHoursSince: stats with since count the attempts
// that ended in the hour since falls in and after; without, all of them.
func TestStatsWindowCountsTheHoursSince(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.attempt("a", nil, time.Second)
	h.clock.Set(t0.Add(3 * time.Hour))
	h.attempt("b", nil, 4*time.Second)
	h.attempt("c", nil, 4*time.Second)

	tests := []struct {
		name     string
		since    time.Time
		attempts int64
		max      time.Duration
	}{
		{"All", time.Time{}, 3, 4 * time.Second},
		{"FromTheFirstHour", t0, 3, 4 * time.Second},
		{"HalfPastTwo", t0.Add(150 * time.Minute), 2, 4 * time.Second},
		{"InTheLastHour", t0.Add(3*time.Hour + 59*time.Minute), 2, 4 * time.Second},
		{"AfterTheLastHour", t0.Add(4 * time.Hour), 0, 0},
	}
	for _, tt := range tests {
		got := h.stats(tt.since)
		if tt.attempts == 0 {
			if len(got) != 0 {
				t.Errorf("%s: stats = %v, want none", tt.name, got)
			}
			continue
		}
		if len(got) != 1 || got[0].GetAttempts() != tt.attempts || got[0].GetMax().AsDuration() != tt.max {
			t.Errorf("%s: stats = %v, want %d attempts, max %v", tt.name, got, tt.attempts, tt.max)
		}
	}
	if p50 := h.stats(t0.Add(2 * time.Hour))[0].GetP50().AsDuration(); p50 < 3*time.Second {
		t.Errorf("P50 of the last hours = %v, want the 4s attempts' bucket", p50)
	}
}

// TestStatsFoldExpiredHoursIntoAllTime: hours past the retention leave the
// windows but still count in the all-time figures.
func TestStatsFoldExpiredHoursIntoAllTime(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{StatsRetention: 2 * time.Hour})
	h.attempt("a", nil, time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for len(h.stats(t0.Add(-24*time.Hour))) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the hour of t0 was never folded")
		}
		h.clock.Advance(time.Hour)
		runtime.Gosched()
	}
	if all := h.stats(time.Time{}); len(all) != 1 || all[0].GetAttempts() != 1 || all[0].GetMax().AsDuration() != time.Second {
		t.Errorf("all-time stats after the fold = %v, want the one attempt", all)
	}
	h.attempt("b", nil, 2*time.Second)
	if all := h.stats(time.Time{}); len(all) != 1 || all[0].GetAttempts() != 2 {
		t.Errorf("all-time stats = %v, want the folded attempt and the new one", all)
	}
}

// TestStatsShowThePolicyInForce: each type's stats carry the options of its
// newest activity with the override applied.
func TestStatsShowThePolicyInForce(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.attempt("a", &durablev1.ActivityOptions{StartToCloseTimeout: dur(30 * time.Second), RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 2}}, time.Second)
	st := h.stats(time.Time{})[0]
	if in := st.GetOptionsInForce(); in.GetStartToCloseTimeout().AsDuration() != 30*time.Second || in.GetRetryPolicy().GetMaxAttempts() != 2 || len(st.GetOverriddenFields()) != 0 {
		t.Errorf("in force %v, fields %q; want 30s, 2 attempts, none", in, st.GetOverriddenFields())
	}
	h.attempt("b", &durablev1.ActivityOptions{StartToCloseTimeout: dur(45 * time.Second)}, time.Second)
	h.setOverride("", &durablev1.OptionsPatch{MaxAttempts: i32(6)})
	st = h.stats(time.Time{})[0]
	if in := st.GetOptionsInForce(); in.GetStartToCloseTimeout().AsDuration() != 45*time.Second || in.GetRetryPolicy().GetMaxAttempts() != 6 ||
		!slices.Equal(st.GetOverriddenFields(), []string{"retry_policy.max_attempts"}) {
		t.Errorf("in force %v, fields %q; want the newest's 45s, the override's 6", in, st.GetOverriddenFields())
	}
}

// TestStatsCountEachAttemptOnceInABatch: completions that the batcher
// commits together are counted together, and a batch that aborts on a
// request that fails (here, every task completed a second time) is retried
// in parts without counting an attempt twice or losing one.
func TestStatsCountEachAttemptOnceInABatch(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	const n = 40
	var tasks []*durablev1.ActivityTask
	for i := range n {
		h.startWithActivity(fmt.Sprintf("wf-%d", i), nil)
		tasks = append(tasks, h.pollActivity())
	}
	h.clock.Advance(3 * time.Second)
	var wg sync.WaitGroup
	var completed atomic.Int64
	for _, task := range append(slices.Clone(tasks), tasks...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.e.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()}); err == nil {
				completed.Add(1)
			}
		}()
	}
	wg.Wait()
	if completed.Load() != n {
		t.Fatalf("%d completions accepted, want %d (each task once)", completed.Load(), n)
	}
	got := h.stats(time.Time{})
	if len(got) != 1 || got[0].GetAttempts() != n || got[0].GetFailures() != 0 || got[0].GetMax().AsDuration() != 3*time.Second {
		t.Fatalf("stats = %v, want %d attempts of 3s and no failure", got, n)
	}
}
