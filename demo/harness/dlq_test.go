package harness

import (
	"context"
	"testing"
	"time"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/demo/flaky"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestDeadLetterRoundTripThroughOutageWorker: a worker with --outage fails
// every attempt, so the activities dead-letter without touching the sink; the
// outage ends (the worker is restarted without the flag); a redrive through
// the client completes the workflow with each effect applied once.
func TestDeadLetterRoundTripThroughOutageWorker(t *testing.T) {
	t.Parallel()
	c, cl := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 3
	outage, err := c.StartWorker("--outage")
	if err != nil {
		t.Fatal(err)
	}
	run, err := cl.Start(ctx, flaky.WorkflowName, flaky.Input{Activities: n, MaxAttempts: 2}, client.StartOptions{ID: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	var letters []*durablev1.PendingActivity
	waitFor(t, 30*time.Second, "3 dead letters", func() bool {
		letters, err = cl.ListDeadLetters(ctx, client.DeadLetterFilter{WorkflowID: run.ID})
		return err == nil && len(letters) == n
	})
	for _, l := range letters {
		if l.GetLastFailure().GetType() != flaky.FailureOutage || l.GetAttempt() != 2 {
			t.Errorf("dead letter %s: attempt %d, failure %v; want attempt 2, %s",
				l.GetActivityId(), l.GetAttempt(), l.GetLastFailure(), flaky.FailureOutage)
		}
	}
	if got := c.Sink().Counts(run.ID + "/"); len(got) != 0 {
		t.Fatalf("effects applied during the outage: %v", got)
	}

	// The outage ends: the operator restarts the worker without --outage.
	outage.Stop(10 * time.Second)
	if _, err := c.StartWorker(); err != nil {
		t.Fatal(err)
	}
	for _, l := range letters {
		if _, err := cl.Redrive(ctx, l.GetWorkflowId(), l.GetActivityId()); err != nil {
			t.Fatalf("redrive %s: %v", l.GetActivityId(), err)
		}
	}
	var res flaky.Result
	if err := run.Get(ctx, &res); err != nil {
		t.Fatal(err)
	}
	counts := c.Sink().Counts(run.ID + "/")
	if len(counts) != n {
		t.Errorf("%d effects applied, want %d: %v", len(counts), n, counts)
	}
	for k, v := range counts {
		if v != 1 {
			t.Errorf("%s delivered %d times, want once", k, v)
		}
	}
	hist, err := cl.History(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var dead, redriven int
	for _, e := range hist {
		switch e.GetType() {
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_DEAD_LETTERED:
			dead++
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_REDRIVEN:
			redriven++
		}
	}
	if dead != n || redriven != n {
		t.Errorf("history has %d dead letters and %d redrives, want %d of each", dead, redriven, n)
	}
}
