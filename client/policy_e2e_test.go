package client_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/worker"
	"github.com/tinyllm/durable/workflow"
)

// TestPolicyOverrideAppliesWithoutRestart: a worker whose code gives its
// activity two attempts keeps running while an operator raises them to six;
// the activity retrying at the time dead-letters after attempt 6, and once
// the override is cleared a new activity has the code's two again.
func TestPolicyOverrideAppliesWithoutRestart(t *testing.T) {
	t.Parallel()
	addr := testdaemon.Start(t, engine.Options{Jitter: func(d time.Duration) time.Duration { return d }})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Attempt 2 of the first activity waits until the override is in, so
	// the override lands while the activity retries, however slow the
	// machine; every other attempt fails at once.
	overridden := make(chan struct{})
	var mu sync.Mutex
	var seenMax []int // max attempts each attempt of the first activity was told
	charge := func(ctx context.Context) error {
		info := activity.GetInfo(ctx)
		if info.WorkflowID == "order-1" {
			if info.Attempt == 2 {
				<-overridden
			}
			mu.Lock()
			seenMax = append(seenMax, info.MaxAttempts)
			mu.Unlock()
		}
		return activity.NewError("CardAPIDown", "502 from the card API")
	}
	order := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &workflow.RetryPolicy{InitialInterval: 20 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 2},
		})
		return workflow.ExecuteActivity(ctx, "Charge", nil).Get(ctx, nil)
	}
	w := worker.New(c, "orders", worker.Options{Logger: slog.New(slog.DiscardHandler)})
	w.RegisterWorkflowWithName(order, "Order")
	w.RegisterActivityWithName(charge, "Charge")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	pending := func(id string) *durablev1.PendingActivity {
		d, err := c.Describe(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if acts := d.GetPendingActivities(); len(acts) == 1 {
			return acts[0]
		}
		return nil
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s", what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	deadLetter := func(id string) *durablev1.PendingActivity {
		t.Helper()
		var a *durablev1.PendingActivity
		waitFor(id+" to dead-letter", func() bool {
			a = pending(id)
			return a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
		})
		return a
	}

	if _, err := c.Start(ctx, "Order", nil, client.StartOptions{ID: "order-1", TaskQueue: "orders"}); err != nil {
		t.Fatal(err)
	}
	waitFor("attempt 2 to start", func() bool {
		a := pending("order-1")
		return a.GetAttempt() == 2 && a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_STARTED
	})
	six := int32(6)
	target := client.PolicyTarget{ActivityType: "Charge"}
	if _, err := c.SetPolicyOverride(ctx, target, &durablev1.OptionsPatch{MaxAttempts: &six}, "INC-7: card API flapping, give it more tries"); err != nil {
		t.Fatal(err)
	}
	close(overridden)

	a := deadLetter("order-1")
	if a.GetAttempt() != 6 || a.GetMaxAttempts() != 6 || len(a.GetAttempts()) != 6 {
		t.Errorf("dead-lettered at attempt %d of %d with %d attempts recorded, want 6 of 6", a.GetAttempt(), a.GetMaxAttempts(), len(a.GetAttempts()))
	}
	if !slices.Equal(a.GetOverriddenFields(), []string{"retry_policy.max_attempts"}) || a.GetOptions().GetRetryPolicy().GetMaxAttempts() != 2 {
		t.Errorf("overridden fields %q, code's max %d; want max attempts from the override over the code's 2",
			a.GetOverriddenFields(), a.GetOptions().GetRetryPolicy().GetMaxAttempts())
	}
	mu.Lock()
	// Attempt 2 was handed out before the override, attempts 3 to 6 after.
	if want := []int{2, 2, 6, 6, 6, 6}; !slices.Equal(seenMax, want) {
		t.Errorf("the worker was told max attempts %v, want %v", seenMax, want)
	}
	mu.Unlock()

	if _, err := c.ClearPolicyOverride(ctx, target, "INC-7 over"); err != nil {
		t.Fatal(err)
	}
	if left, err := c.ListPolicyOverrides(ctx); err != nil || len(left) != 0 {
		t.Fatalf("overrides after the clear = %v, %v", left, err)
	}
	if _, err := c.Start(ctx, "Order", nil, client.StartOptions{ID: "order-2", TaskQueue: "orders"}); err != nil {
		t.Fatal(err)
	}
	if b := deadLetter("order-2"); b.GetAttempt() != 2 || b.GetMaxAttempts() != 2 || len(b.GetOverriddenFields()) != 0 {
		t.Errorf("after the clear: dead-lettered at attempt %d of %d, overridden %q; want 2 of 2 from the code", b.GetAttempt(), b.GetMaxAttempts(), b.GetOverriddenFields())
	}
}
