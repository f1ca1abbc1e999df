package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// failWith starts workflow id whose one activity (ChargeCard) fails once
// with failure type typ and is dead-lettered.
func (d *driver) failWith(id, typ string) {
	d.t.Helper()
	d.start(id, "Checkout")
	d.decide(schedule("1", "ChargeCard"))
	task := d.activity()
	_, err := d.svc.FailActivityTask(d.ctx(), &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Identity: "test-worker",
		Failure: &durablev1.Failure{Type: typ, Message: "no answer in time"}})
	if err != nil {
		d.t.Fatalf("fail %s: %v", id, err)
	}
}

// deadIDs are the workflows whose letters are dead-lettered now, sorted.
func deadIDs(t *testing.T, c *client.Client) []string {
	t.Helper()
	letters, err := c.ListDeadLetters(context.Background(), client.DeadLetterFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range letters {
		ids = append(ids, a.GetWorkflowId())
	}
	slices.Sort(ids)
	return ids
}

// TestGroupSelectsExactlyItsLetters: with letters of Timeout and of
// HeartbeatTimeout, the words the console shows for the Timeout group
// (type:Timeout) list and redrive exactly the Timeout letters in wf, both
// when the daemon applies the selection (a filter) and when wf does (a
// prefix it has no field for, sent by name).
func TestGroupSelectsExactlyItsLetters(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	d := newDriver(t, c, "exact")
	for i, typ := range []string{"Timeout", "HeartbeatTimeout", "Timeout", "HeartbeatTimeout", "HeartbeatTimeout", "Timeout"} {
		d.failWith(fmt.Sprintf("order-%d", i), typ)
	}
	// refund-1 is a Timeout outside the prefix of the first redrive.
	d.failWith("refund-1", "Timeout")

	var doc struct {
		DeadLetters []struct{ WorkflowID string } `json:"deadLetters"`
	}
	r := wf(t, "--addr", addr, "--json", "dlq", "list", "--select", "type:Timeout").wantCode(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.DeadLetters) != 4 {
		t.Fatalf("dlq list --select type:Timeout = %v, %s; want the 4 Timeout letters", err, r.stdout)
	}

	// Selected by wf: the prefix has no daemon field; the dry run counts
	// exactly, and the redrive sends the letters by name.
	r = wf(t, "--addr", addr, "dlq", "redrive", "--all", "--select", "type:Timeout wf:order-*", "--dry-run").wantCode(t, exitOK)
	mustContain(t, r.stdout, "would redrive 3 dead letters (type:Timeout wf:order-*)")
	r = wf(t, "--addr", addr, "dlq", "redrive", "--all", "--select", "type:Timeout wf:order-*", "--wait").wantCode(t, exitOK)
	mustContain(t, r.stdout, "redriving 3 dead letters (type:Timeout wf:order-*, sent by name)")
	if got, want := deadIDs(t, c), []string{"order-1", "order-3", "order-4", "refund-1"}; !slices.Equal(got, want) {
		t.Fatalf("dead after redriving type:Timeout wf:order-*: %v, want %v", got, want)
	}

	// Applied by the daemon: the same word is its exact filter.
	r = wf(t, "--addr", addr, "dlq", "redrive", "--all", "--failure-type", "Timeout", "--wait").wantCode(t, exitOK)
	mustContain(t, r.stdout, "redriving 1 dead letter (type:Timeout)")
	if got, want := deadIDs(t, c), []string{"order-1", "order-3", "order-4"}; !slices.Equal(got, want) {
		t.Fatalf("dead after redriving type:Timeout: %v, want only the HeartbeatTimeout letters %v", got, want)
	}
}

// TestActivitiesSelect: wf activities takes the console's words, and says
// which word is wrong.
func TestActivitiesSelect(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	d := newDriver(t, c, "acts")
	d.failWith("order-1", "Timeout")
	d.failWith("refund-1", "Timeout")
	r := wf(t, "--addr", addr, "activities", "--select", "state:dead wf:order-*").wantCode(t, exitOK)
	mustContain(t, r.stdout, "order-1", "1 activity")
	// An activity on a queue nobody polls is nopoller at once, by the
	// daemon's queues rather than a wait.
	d.start("stuck-1", "Checkout")
	lonely := schedule("1", "ChargeCard")
	lonely.ActivityOptions.TaskQueue = "nobody-polls"
	d.decide(lonely)
	r = wf(t, "--addr", addr, "activities", "--select", "nopoller").wantCode(t, exitOK)
	mustContain(t, r.stdout, "stuck-1", "1 activity")
	r = wf(t, "--addr", addr, "activities", "--select", "attempt>=x").wantCode(t, exitUsage)
	mustContain(t, r.stderr, `"attempt>=x": want attempt>=N`)
	r = wf(t, "--addr", addr, "activities", "--state", "running", "--select", "state:dead").wantCode(t, exitUsage)
	mustContain(t, r.stderr, "--state running and --select disagree")
}
