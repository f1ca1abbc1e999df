package harness

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/demo/backlog"
)

// lastCheckpoint returns the heartbeat details the daemon holds for a
// workflow's single activity, or false if none yet.
func lastCheckpoint(ctx context.Context, cl *client.Client, id string) (backlog.Checkpoint, bool) {
	var cp backlog.Checkpoint
	resp, err := cl.Describe(ctx, id)
	if err != nil || len(resp.GetPendingActivities()) == 0 {
		return cp, false
	}
	b := resp.GetPendingActivities()[0].GetHeartbeatDetails()
	return cp, len(b) > 0 && json.Unmarshal(b, &cp) == nil
}

// TestResumableBacklogResumesFromCheckpoint walks a 4,000-item backlog twice
// at once on separate queues: one run undisturbed, the other with its worker
// SIGKILLed right after the daemon stored a checkpoint at or past item 1,000.
// The killed run's next attempt starts at that checkpoint (not 0), redoes at
// most one batch, and ends with the same result as the undisturbed run.
func TestResumableBacklogResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	c, cl := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	in := backlog.Input{Items: 4000, Batch: 200}

	victim, err := c.StartWorker("--task-queue", "backlog-kill")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartWorker("--task-queue", "backlog-clean"); err != nil {
		t.Fatal(err)
	}
	killed, err := cl.Start(ctx, backlog.WorkflowName, in, client.StartOptions{ID: "backlog-kill", TaskQueue: "backlog-kill"})
	if err != nil {
		t.Fatal(err)
	}
	clean, err := cl.Start(ctx, backlog.WorkflowName, in, client.StartOptions{ID: "backlog-clean", TaskQueue: "backlog-clean"})
	if err != nil {
		t.Fatal(err)
	}

	// Kill the worker as soon as the daemon holds a checkpoint >= 1000, so
	// what is redone is what the worker did after that heartbeat.
	var cp backlog.Checkpoint
	waitFor(t, 60*time.Second, "a checkpoint at or past item 1000", func() bool {
		got, ok := lastCheckpoint(ctx, cl, killed.ID)
		if ok && got.NextIndex >= 1000 {
			victim.Kill()
			cp = got
			return true
		}
		return false
	})
	delivered := len(c.Sink().Counts(killed.ID + "/"))
	t.Logf("SIGKILLed %s with checkpoint next_index=%d after %d items were delivered", victim.Name, cp.NextIndex, delivered)
	if cp.NextIndex >= in.Items {
		t.Fatalf("checkpoint %d: the walk finished before the kill", cp.NextIndex)
	}
	if _, err := c.StartWorker("--task-queue", "backlog-kill"); err != nil {
		t.Fatal(err)
	}

	var got, want backlog.Summary
	if err := clean.Get(ctx, &want); err != nil {
		t.Fatal(err)
	}
	if err := killed.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got.ResumedFrom == 0 || got.ResumedFrom != cp.NextIndex || got.Attempt < 2 {
		t.Errorf("killed run finished on attempt %d resumed from %d, want attempt >= 2 resumed from the checkpoint %d",
			got.Attempt, got.ResumedFrom, cp.NextIndex)
	}
	if want.ResumedFrom != 0 || want.Attempt != 1 {
		t.Errorf("clean run: attempt %d resumed from %d, want 1 from 0", want.Attempt, want.ResumedFrom)
	}
	if !reflect.DeepEqual(got.Acc, want.Acc) {
		t.Errorf("killed run's result %+v differs from the uninterrupted run's %+v", got.Acc, want.Acc)
	}
	if exp := backlog.Expected(in.Items); !reflect.DeepEqual(want.Acc, exp) {
		t.Errorf("uninterrupted result %+v, want %+v", want.Acc, exp)
	}

	// Effects: every item applied; only items of the batch after the
	// checkpoint were delivered twice.
	for _, run := range []struct {
		id         string
		redoFrom   int
		maxRedone  int
		redoneSeen *int
	}{
		{id: killed.ID, redoFrom: cp.NextIndex, maxRedone: in.Batch, redoneSeen: new(int)},
		{id: clean.ID, redoFrom: in.Items, maxRedone: 0, redoneSeen: new(int)},
	} {
		counts := c.Sink().Counts(run.id + "/")
		for i := range in.Items {
			n := counts[run.id+"/1/"+strconv.Itoa(i)]
			switch {
			case n == 0:
				t.Errorf("%s item %d never applied", run.id, i)
			case n > 1 && (i < run.redoFrom || i >= run.redoFrom+in.Batch):
				t.Errorf("%s item %d delivered %d times, outside the batch after the checkpoint", run.id, i, n)
			case n > 1:
				*run.redoneSeen++
			}
		}
		if len(counts) != in.Items {
			t.Errorf("%s: %d keys in the sink, want %d", run.id, len(counts), in.Items)
		}
		if *run.redoneSeen > run.maxRedone {
			t.Errorf("%s: %d items redone, want at most %d", run.id, *run.redoneSeen, run.maxRedone)
		}
		t.Logf("%s: %d items redone", run.id, *run.redoneSeen)
	}
}
