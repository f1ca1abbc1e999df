package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestHeartbeatExtendsLeaseAndResumes: a heartbeat moves the lease deadline to
// now + heartbeat_timeout and stores its details; describe shows them; when
// the worker dies the lease expires as a HeartbeatTimeout and attempt 2
// receives ckpt-3 and the same idempotency key.
func TestHeartbeatExtendsLeaseAndResumes(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	const hb = 10 * time.Second
	h.startWithActivity("wf", &durablev1.ActivityOptions{
		StartToCloseTimeout: dur(10 * time.Minute), HeartbeatTimeout: dur(hb),
		RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000},
	})
	task := h.pollActivity()
	if got, want := task.GetDeadline().AsTime(), t0.Add(hb); !got.Equal(want) {
		t.Fatalf("first lease deadline = %v, want start + heartbeat timeout = %v", got, want)
	}
	if task.GetHeartbeatTimeout().AsDuration() != hb || task.GetHeartbeatDetails() != nil {
		t.Errorf("task heartbeat timeout %v details %q", task.GetHeartbeatTimeout().AsDuration(), task.GetHeartbeatDetails())
	}
	for i, ckpt := range []string{"ckpt-1", "ckpt-2", "ckpt-3"} {
		h.clock.Advance(4 * time.Second)
		resp, err := h.e.RecordHeartbeat(context.Background(), &durablev1.HeartbeatRequest{TaskToken: task.GetTaskToken(), Details: []byte(ckpt)})
		if err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
		if got, want := resp.GetDeadline().AsTime(), h.clock.Now().Add(hb); !got.Equal(want) {
			t.Fatalf("heartbeat %d: deadline %v, want now + %v = %v", i, got, hb, want)
		}
	}
	hbAt := h.clock.Now()
	d := h.describe("wf").GetPendingActivities()[0]
	if string(d.GetHeartbeatDetails()) != "ckpt-3" || !d.GetLastHeartbeatTime().AsTime().Equal(hbAt) || !d.GetLeaseDeadline().AsTime().Equal(hbAt.Add(hb)) {
		t.Fatalf("describe: details %q, last heartbeat %v, deadline %v", d.GetHeartbeatDetails(), d.GetLastHeartbeatTime().AsTime(), d.GetLeaseDeadline().AsTime())
	}
	if d.GetState() != durablev1.ActivityState_ACTIVITY_STATE_STARTED || d.GetLastWorkerIdentity() != "worker-1" {
		t.Errorf("describe: state %v identity %q", d.GetState(), d.GetLastWorkerIdentity())
	}

	// The worker dies: no more heartbeats. One tick before the deadline the
	// lease still holds.
	h.clock.Advance(hb - time.Millisecond)
	if d := h.describe("wf").GetPendingActivities()[0]; d.GetState() != durablev1.ActivityState_ACTIVITY_STATE_STARTED {
		t.Fatalf("lease ended early: %v", d.GetState())
	}
	h.clock.Advance(time.Millisecond)
	d = h.describe("wf").GetPendingActivities()[0]
	if d.GetState() != durablev1.ActivityState_ACTIVITY_STATE_RETRYING || d.GetLastFailure().GetType() != engine.TimeoutHeartbeat {
		t.Fatalf("after the heartbeat timeout: state %v failure %v", d.GetState(), d.GetLastFailure())
	}
	h.clock.Advance(time.Second)
	next := h.pollActivity()
	if next == nil || next.GetAttempt() != 2 {
		t.Fatalf("poll after backoff = %v, want attempt 2", next)
	}
	if string(next.GetHeartbeatDetails()) != "ckpt-3" || next.GetIdempotencyKey() != task.GetIdempotencyKey() || next.GetIdempotencyKey() != "wf/1" {
		t.Fatalf("attempt 2: details %q key %q, want ckpt-3 and %q", next.GetHeartbeatDetails(), next.GetIdempotencyKey(), task.GetIdempotencyKey())
	}
}

// TestStartToCloseTimeoutRetries: an attempt that neither heartbeats nor
// finishes times out at start + start_to_close and is retried.
func TestStartToCloseTimeoutRetries(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.startWithActivity("wf", &durablev1.ActivityOptions{StartToCloseTimeout: dur(30 * time.Second)})
	task := h.pollActivity()
	if !task.GetDeadline().AsTime().Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("deadline = %v", task.GetDeadline().AsTime())
	}
	h.clock.Advance(30 * time.Second)
	d := h.describe("wf").GetPendingActivities()[0]
	if d.GetLastFailure().GetType() != engine.TimeoutStartToClose || d.GetAttempt() != 2 {
		t.Fatalf("after start-to-close: %v attempt %d", d.GetLastFailure(), d.GetAttempt())
	}
}

// TestStaleLeaseHeartbeatAndFailRefused: once a lease has expired and the
// activity moved on to another attempt, the old token can neither heartbeat,
// fail nor complete it, and the live attempt is untouched.
func TestStaleLeaseHeartbeatAndFailRefused(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.startWithActivity("wf", &durablev1.ActivityOptions{StartToCloseTimeout: dur(5 * time.Second), RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000}})
	stale := h.pollActivity()
	h.clock.Advance(5 * time.Second) // lease 1 expires
	h.clock.Advance(time.Second)     // attempt 2 is due
	live := h.pollActivity()
	if live == nil || live.GetAttempt() != 2 {
		t.Fatalf("poll = %v, want attempt 2", live)
	}
	ctx := context.Background()
	if _, err := h.e.RecordHeartbeat(ctx, &durablev1.HeartbeatRequest{TaskToken: stale.GetTaskToken(), Details: []byte("old")}); !errors.Is(err, engine.ErrStaleTask) {
		t.Errorf("stale heartbeat: %v, want ErrStaleTask", err)
	}
	if _, err := h.e.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: stale.GetTaskToken(), Failure: &durablev1.Failure{Type: "X"}}); !errors.Is(err, engine.ErrStaleTask) {
		t.Errorf("stale fail: %v, want ErrStaleTask", err)
	}
	if _, err := h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: stale.GetTaskToken()}); !errors.Is(err, engine.ErrStaleTask) {
		t.Errorf("stale complete: %v, want ErrStaleTask", err)
	}
	d := h.describe("wf").GetPendingActivities()[0]
	if d.GetAttempt() != 2 || d.GetState() != durablev1.ActivityState_ACTIVITY_STATE_STARTED || string(d.GetHeartbeatDetails()) == "old" {
		t.Fatalf("the stale worker steered the live attempt: %v", d)
	}
	if _, err := h.e.RecordHeartbeat(ctx, &durablev1.HeartbeatRequest{TaskToken: live.GetTaskToken()}); err != nil {
		t.Errorf("live heartbeat: %v", err)
	}
	if _, err := h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: live.GetTaskToken(), Result: []byte(`"ok"`)}); err != nil {
		t.Fatalf("live complete: %v", err)
	}
	if _, err := h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: live.GetTaskToken()}); !errors.Is(err, engine.ErrStaleTask) {
		t.Errorf("second completion: %v, want ErrStaleTask", err)
	}
	if _, err := h.e.RecordHeartbeat(ctx, &durablev1.HeartbeatRequest{TaskToken: []byte("garbage")}); !errors.As(err, new(*engine.InvalidError)) {
		t.Errorf("garbage token: %v, want *InvalidError", err)
	}
}
