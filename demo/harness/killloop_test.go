package harness

import (
	"context"
	"testing"
	"time"

	"github.com/tinyllm/durable/demo/flaky"
)

// TestFlakyActivityKillLoopExactlyOnce runs 20 flaky activities (fail rate
// 0.5) while 8 workers are SIGKILLed right after their effect became durable
// and durabled is SIGKILLed and restarted twice: the workflow completes, every
// key is applied exactly once, and some key was delivered more than once, so
// redelivery really happened.
func TestFlakyActivityKillLoopExactlyOnce(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	r, err := RunFlaky(context.Background(), c, FlakyPlan{
		WorkflowID:     "kill-loop",
		Input:          flaky.Input{Activities: 20, FailRate: 0.5, Seed: 7},
		Workers:        3,
		WorkerKills:    8,
		DaemonRestarts: 2,
		Timeout:        90 * time.Second,
		Logf:           t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *r)
	if !r.Completed {
		t.Fatalf("workflow %s, want completed", r.Status)
	}
	if r.WorkerKills != 8 || r.DaemonRestarts < 2 {
		t.Errorf("kills %d, restarts %d; want 8 and at least 2", r.WorkerKills, r.DaemonRestarts)
	}
	if r.Activities != 20 || r.EffectsApplied != 20 || !r.ExactlyOnce {
		t.Errorf("activities %d, effects applied %d, missing %v, unexpected %v; want 20 applied exactly once",
			r.Activities, r.EffectsApplied, r.MissingKeys, r.UnexpectedKeys)
	}
	for k, n := range c.Sink().Counts("kill-loop/") {
		if n < 1 {
			t.Errorf("key %s never delivered", k)
		}
	}
	if len(r.RedeliveredKeys) == 0 || r.DuplicateDeliveries == 0 {
		t.Error("no key was delivered twice: the run did not exercise redelivery")
	}
}
