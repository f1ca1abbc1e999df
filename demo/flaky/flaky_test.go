package flaky_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/demo/flaky"
	"github.com/tinyllm/durable/demo/sink"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	"github.com/tinyllm/durable/worker"
)

// setup runs an in-process daemon and a worker for FlakyDemo delivering to a
// fresh sink, and returns a client and the sink.
func setup(t *testing.T) (*client.Client, *sink.Store) {
	t.Helper()
	addr := testdaemon.Start(t, engine.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	st, err := sink.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := worker.New(c, client.DefaultTaskQueue, worker.Options{Logger: slog.New(slog.DiscardHandler)})
	a := &flaky.Activities{Sink: st}
	w.RegisterWorkflowWithName(flaky.FlakyDemo, flaky.WorkflowName)
	w.RegisterActivityWithName(a.FlakyStep, flaky.ActivityName)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Stop()
		st.Close()
	})
	return c, st
}

func TestDraw_IsAFunctionOfSeedKeyAndAttempt(t *testing.T) {
	t.Parallel()
	a := flaky.Draw(1, "wf/1", 1)
	for _, tc := range []struct {
		name    string
		seed    int64
		key     string
		attempt int
		same    bool
	}{
		{"Same", 1, "wf/1", 1, true},
		{"OtherSeed", 2, "wf/1", 1, false},
		{"OtherKey", 1, "wf/2", 1, false},
		{"OtherAttempt", 1, "wf/1", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := flaky.Draw(tc.seed, tc.key, tc.attempt)
			if (a == b) != tc.same {
				t.Errorf("Draw = %+v vs %+v, want same=%v", b, a, tc.same)
			}
			if b.Fail < 0 || b.Fail >= 1 || b.Work <= 0 {
				t.Errorf("Draw out of range: %+v", b)
			}
		})
	}
}

func TestFlakyDemo_CompletesWithEveryEffectOnce(t *testing.T) {
	t.Parallel()
	c, st := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.Start(ctx, flaky.WorkflowName, flaky.Input{Activities: 5, FailRate: 0.5, Seed: 3}, client.StartOptions{ID: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	var res flaky.Result
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Activities != 5 || len(res.Keys) != 5 || res.Attempts < 5 {
		t.Errorf("result %+v, want 5 activities and keys", res)
	}
	counts := st.Counts("ok/")
	if len(counts) != 5 {
		t.Errorf("sink has %d keys, want 5: %v", len(counts), counts)
	}
	for _, k := range res.Keys {
		if counts[k] < 1 {
			t.Errorf("key %s never reached the sink", k)
		}
	}
}

func TestFlakyDemo_BadInputFailsTheWorkflowWithBadSpec(t *testing.T) {
	t.Parallel()
	c, st := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.Start(ctx, flaky.WorkflowName, flaky.Input{Activities: 3, BadInput: true}, client.StartOptions{ID: "bad"})
	if err != nil {
		t.Fatal(err)
	}
	err = run.Get(ctx, nil)
	var ae *activity.Error
	if !client.IsWorkflowFailed(err) || !errors.As(err, &ae) || ae.Type != flaky.FailureBadSpec || !ae.NoRetry {
		t.Fatalf("Get = %v, want the workflow failed with non-retryable %s", err, flaky.FailureBadSpec)
	}
	if n := len(st.Counts("bad/")); n != 2 {
		t.Errorf("%d effects applied, want the 2 good activities'", n)
	}
}
