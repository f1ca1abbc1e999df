package harness

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/demo/backlog"
	"github.com/tinyllm/durable/demo/sink"
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
// SIGKILLed in the middle of a batch, at item 1,100, once the daemon holds the
// checkpoint of that batch's start (1,000). The killed run's next attempt
// starts at 1,000 (not 0), redoes exactly items 1,000..1,100 (less than one
// batch), and ends with the same result as the undisturbed run.
func TestResumableBacklogResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	c, cl := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	in := backlog.Input{Items: 4000, Batch: 200}
	const killAt = 1100
	boundary := killAt / in.Batch * in.Batch

	// The sink holds the victim's delivery of item killAt, waits until the
	// daemon has the checkpoint of the batch boundary before it, and kills
	// the worker before acknowledging: what is redone is exactly what the
	// worker did after its last checkpoint.
	var victimPID atomic.Int64
	killed := make(chan backlog.Checkpoint, 1)
	c.SetAfterApply(func(d sink.Delivery, pid int) {
		if int64(pid) != victimPID.Load() || d.Key != "backlog-kill/1/"+strconv.Itoa(killAt) {
			return
		}
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if cp, ok := lastCheckpoint(ctx, cl, "backlog-kill"); ok && cp.NextIndex == boundary {
				c.Worker(pid).Kill()
				killed <- cp
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		close(killed)
	})
	victim, err := c.StartWorker("--task-queue", "backlog-kill")
	if err != nil {
		t.Fatal(err)
	}
	victimPID.Store(int64(victim.PID()))
	if _, err := c.StartWorker("--task-queue", "backlog-clean"); err != nil {
		t.Fatal(err)
	}
	killedRun, err := cl.Start(ctx, backlog.WorkflowName, in, client.StartOptions{ID: "backlog-kill", TaskQueue: "backlog-kill"})
	if err != nil {
		t.Fatal(err)
	}
	clean, err := cl.Start(ctx, backlog.WorkflowName, in, client.StartOptions{ID: "backlog-clean", TaskQueue: "backlog-clean"})
	if err != nil {
		t.Fatal(err)
	}
	var cp backlog.Checkpoint
	select {
	case got, ok := <-killed:
		if !ok {
			t.Fatalf("the daemon never held the checkpoint at %d", boundary)
		}
		cp = got
	case <-ctx.Done():
		t.Fatal("the victim never delivered item", killAt)
	}
	t.Logf("SIGKILLed %s at item %d with the daemon's checkpoint at %d", victim.Name, killAt, cp.NextIndex)
	if _, err := c.StartWorker("--task-queue", "backlog-kill"); err != nil {
		t.Fatal(err)
	}

	var got, want backlog.Summary
	if err := clean.Get(ctx, &want); err != nil {
		t.Fatal(err)
	}
	if err := killedRun.Get(ctx, &got); err != nil {
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

	// Effects: every item applied; exactly the items between the checkpoint
	// and the kill were delivered twice, and they are less than one batch.
	for _, run := range []struct {
		id     string
		redone [2]int // [from, to] delivered twice; from > to for none
	}{
		{id: killedRun.ID, redone: [2]int{cp.NextIndex, killAt}},
		{id: clean.ID, redone: [2]int{1, 0}},
	} {
		counts := c.Sink().Counts(run.id + "/")
		redone := 0
		for i := range in.Items {
			n := counts[run.id+"/1/"+strconv.Itoa(i)]
			want := 1
			if i >= run.redone[0] && i <= run.redone[1] {
				want = 2
			}
			if n != want {
				t.Errorf("%s item %d delivered %d times, want %d", run.id, i, n, want)
			}
			if n > 1 {
				redone++
			}
		}
		if len(counts) != in.Items {
			t.Errorf("%s: %d keys in the sink, want %d", run.id, len(counts), in.Items)
		}
		if redone > in.Batch {
			t.Errorf("%s: %d items redone, more than one batch (%d)", run.id, redone, in.Batch)
		}
		t.Logf("%s: %d items redone", run.id, redone)
	}
}
