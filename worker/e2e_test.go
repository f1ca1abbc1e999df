package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/worker"
	"github.com/tinyllm/durable/workflow"
)

var fastRetry = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute,
	RetryPolicy:         &workflow.RetryPolicy{InitialInterval: 10 * time.Millisecond, MaximumAttempts: 10},
}

func Double(ctx context.Context, n int) (int, error) { return 2 * n, nil }

func FanOut(ctx workflow.Context, n int) ([]int, error) {
	ctx = workflow.WithActivityOptions(ctx, fastRetry)
	futures := make([]workflow.Future, n)
	for i := range n {
		futures[i] = workflow.ExecuteActivity(ctx, Double, i)
	}
	out := make([]int, n)
	for i, f := range futures {
		if err := f.Get(ctx, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func TestFanOutOf50ActivitiesCompletes(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	startWorker(t, c, "fan", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflow(FanOut)
		w.RegisterActivity(Double)
	})
	ctx := testCtx(t)
	run, err := c.Start(ctx, "FanOut", 50, client.StartOptions{TaskQueue: "fan"})
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 50 {
		t.Fatalf("got %d results, want 50", len(got))
	}
	for i, v := range got {
		if v != 2*i {
			t.Fatalf("result %d = %d, want %d", i, v, 2*i)
		}
	}
}

func TestRetryFollowsPolicyTiming(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	const initial = 200 * time.Millisecond
	flaky := func(ctx context.Context) error { return activity.NewError("Flaky", "try again") }
	wf := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &workflow.RetryPolicy{InitialInterval: initial, BackoffCoefficient: 2, MaximumAttempts: 3},
		})
		return workflow.ExecuteActivity(ctx, "Flaky", nil).Get(ctx, nil)
	}
	startWorker(t, c, "retry", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(wf, "Retry")
		w.RegisterActivityWithName(flaky, "Flaky")
	})
	ctx := testCtx(t)
	run, err := c.Start(ctx, "Retry", nil, client.StartOptions{TaskQueue: "retry"})
	if err != nil {
		t.Fatal(err)
	}
	var a *durablev1.PendingActivity
	waitFor(t, "the activity to be dead-lettered after 3 attempts", func() bool {
		a = pending(t, c, run.ID, "1")
		return a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
	})
	trail := a.GetAttempts()
	if len(trail) != 3 {
		t.Fatalf("attempt trail has %d attempts, want 3: %v", len(trail), trail)
	}
	for i := 1; i < len(trail); i++ {
		want := initial << (i - 1) // no jitter in this daemon: the plain backoff
		gap := trail[i].GetStartedTime().AsTime().Sub(trail[i-1].GetEndedTime().AsTime())
		if gap < want || gap > want+3*time.Second {
			t.Errorf("gap before attempt %d = %v, want at least %v (and not much more)", i+1, gap, want)
		}
		if ft := trail[i-1].GetFailure().GetType(); ft != "Flaky" {
			t.Errorf("attempt %d failure type = %q, want Flaky", i, ft)
		}
	}
}

// progress is the checkpoint of the resumable activity.
type progress struct{ Done int }

func TestHeartbeatingActivityResumesFromDetailsAfterWorkerDies(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	const steps, killAt = 10, 5
	var resumedFrom atomic.Int32
	resumedFrom.Store(-1)
	// copyItems checkpoints every step; on the doomed worker it hangs at
	// killAt (whichever attempt it runs), which is where that worker dies.
	copyItems := func(doomed bool) func(ctx context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			var p progress
			if d := activity.HeartbeatDetails(ctx); d != nil {
				if err := json.Unmarshal(d, &p); err != nil {
					return 0, err
				}
			}
			if !doomed {
				resumedFrom.Store(int32(p.Done))
			}
			for p.Done < steps {
				p.Done++
				b, _ := json.Marshal(p)
				activity.RecordHeartbeat(ctx, b)
				if doomed && p.Done == killAt {
					<-ctx.Done()
					return 0, ctx.Err()
				}
			}
			return p.Done, nil
		}
	}
	wf := func(ctx workflow.Context) (int, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:           "copy",
			StartToCloseTimeout: time.Minute,
			HeartbeatTimeout:    2 * time.Second,
			RetryPolicy:         &workflow.RetryPolicy{InitialInterval: 10 * time.Millisecond},
		})
		var n int
		err := workflow.ExecuteActivity(ctx, "Copy", nil).Get(ctx, &n)
		return n, err
	}
	startWorker(t, c, "main", worker.Options{}, func(w *worker.Worker) { w.RegisterWorkflowWithName(wf, "Resumable") })

	// The first worker has its own connection, which the test cuts.
	doomed := dial(t, addr)
	startWorker(t, doomed, "copy", worker.Options{StopTimeout: time.Millisecond}, func(w *worker.Worker) {
		w.RegisterActivityWithName(copyItems(true), "Copy")
	})
	ctx := testCtx(t)
	run, err := c.Start(ctx, "Resumable", nil, client.StartOptions{TaskQueue: "main"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(progress{Done: killAt})
	waitFor(t, "the checkpoint of step 5 to reach the daemon", func() bool {
		return string(pending(t, c, run.ID, "1").GetHeartbeatDetails()) == string(want)
	})
	doomed.Close() // nothing from this worker reaches the daemon any more

	startWorker(t, c, "copy", worker.Options{}, func(w *worker.Worker) { w.RegisterActivityWithName(copyItems(false), "Copy") })
	var n int
	if err := run.Get(ctx, &n); err != nil {
		t.Fatal(err)
	}
	if n != steps || resumedFrom.Load() != killAt {
		t.Fatalf("result %d resumed from %d, want %d resumed from %d", n, resumedFrom.Load(), steps, killAt)
	}
}

func TestDeadLetterHoldsWorkflowUntilRedrive(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	var fixed atomic.Bool
	ship := func(ctx context.Context) (string, error) {
		if !fixed.Load() {
			return "", activity.NewError("CarrierDown", "carrier API is down")
		}
		return "shipped", nil
	}
	wf := func(ctx workflow.Context) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &workflow.RetryPolicy{InitialInterval: 10 * time.Millisecond, MaximumAttempts: 2},
		})
		var s string
		err := workflow.ExecuteActivity(ctx, "Ship", nil).Get(ctx, &s)
		return s, err
	}
	startWorker(t, c, "dlq", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(wf, "Shipping")
		w.RegisterActivityWithName(ship, "Ship")
	})
	ctx := testCtx(t)
	run, err := c.Start(ctx, "Shipping", nil, client.StartOptions{TaskQueue: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a dead letter", func() bool {
		dl, err := c.ListDeadLetters(ctx, client.DeadLetterFilter{WorkflowID: run.ID, FailureType: "CarrierDown"})
		return err == nil && len(dl) == 1
	})
	d, err := c.Describe(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := d.GetWorkflow().GetStatus(); s != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
		t.Fatalf("workflow status with a dead letter = %v, want running", s)
	}

	fixed.Store(true)
	if _, err := c.Redrive(ctx, run.ID, "1"); err != nil {
		t.Fatal(err)
	}
	var s string
	if err := run.Get(ctx, &s); err != nil || s != "shipped" {
		t.Fatalf("Get = %q, %v; want shipped", s, err)
	}
}

func TestReplayAfterWorkerRestartDoesNotRerunActivities(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	var runsA, runsB, runsC atomic.Int32
	var bStarted atomic.Bool
	stepA := func(ctx context.Context) (string, error) { runsA.Add(1); return "a", nil }
	stepB := func(ctx context.Context) (string, error) {
		runsB.Add(1)
		if activity.Attempt(ctx) == 1 {
			bStarted.Store(true)
			<-ctx.Done() // still running when its worker stops
			return "", ctx.Err()
		}
		return "b", nil
	}
	stepC := func(ctx context.Context) (string, error) { runsC.Add(1); return "c", nil }
	wf := func(ctx workflow.Context) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, fastRetry)
		var out string
		for _, step := range []string{"A", "B", "C"} {
			var s string
			if err := workflow.ExecuteActivity(ctx, step, nil).Get(ctx, &s); err != nil {
				return "", err
			}
			out += s
		}
		return out, nil
	}
	register := func(w *worker.Worker) {
		w.RegisterWorkflowWithName(wf, "Steps")
		w.RegisterActivityWithName(stepA, "A")
		w.RegisterActivityWithName(stepB, "B")
		w.RegisterActivityWithName(stepC, "C")
	}
	first := startWorker(t, dial(t, addr), "steps", worker.Options{StopTimeout: 50 * time.Millisecond}, register)
	ctx := testCtx(t)
	run, err := c.Start(ctx, "Steps", nil, client.StartOptions{TaskQueue: "steps"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "step B to start", bStarted.Load)
	first.Stop()

	startWorker(t, dial(t, addr), "steps", worker.Options{}, register)
	var out string
	if err := run.Get(ctx, &out); err != nil || out != "abc" {
		t.Fatalf("Get = %q, %v; want abc", out, err)
	}
	if a, b, c := runsA.Load(), runsB.Load(), runsC.Load(); a != 1 || b != 2 || c != 1 {
		t.Fatalf("runs A=%d B=%d C=%d, want A=1 B=2 (abandoned, retried) C=1", a, b, c)
	}
}

func TestChangedWorkflowIsNonDeterministic(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	noop := func(ctx context.Context) error { return nil }
	v1 := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, fastRetry)
		if err := workflow.ExecuteActivity(ctx, "Reserve", nil).Get(ctx, nil); err != nil {
			return err
		}
		gated := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: "gate", StartToCloseTimeout: time.Minute})
		return workflow.ExecuteActivity(gated, "Gate", nil).Get(ctx, nil)
	}
	v2 := func(ctx workflow.Context) error { // Charge now comes first
		ctx = workflow.WithActivityOptions(ctx, fastRetry)
		return workflow.ExecuteActivity(ctx, "Charge", nil).Get(ctx, nil)
	}
	old := startWorker(t, dial(t, addr), "nd", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(v1, "Checkout")
		w.RegisterActivityWithName(noop, "Reserve")
	})
	ctx := testCtx(t)
	run, err := c.Start(ctx, "Checkout", nil, client.StartOptions{TaskQueue: "nd"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the gate activity to be scheduled", func() bool { return pending(t, c, run.ID, "2") != nil })
	old.Stop()

	startWorker(t, dial(t, addr), "nd", worker.Options{}, func(w *worker.Worker) {
		w.RegisterWorkflowWithName(v2, "Checkout")
		w.RegisterActivityWithName(noop, "Charge")
	})
	startWorker(t, c, "gate", worker.Options{}, func(w *worker.Worker) { w.RegisterActivityWithName(noop, "Gate") })

	var failure *durablev1.Failure
	waitFor(t, "a WorkflowTaskFailed event", func() bool {
		for _, ev := range history(t, c, run.ID) {
			if ev.GetType() == durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED {
				failure = ev.GetFailure()
				return true
			}
		}
		return false
	})
	if failure.GetType() != "NonDeterminism" || !strings.Contains(failure.GetMessage(), "Reserve") || !strings.Contains(failure.GetMessage(), "Charge") {
		t.Fatalf("workflow task failure = %v, want NonDeterminism naming Reserve and Charge", failure)
	}
	d, err := c.Describe(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := d.GetWorkflow().GetStatus(); s != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
		t.Fatalf("status = %v, want still running (the task is retried, never silently wrong)", s)
	}
}
