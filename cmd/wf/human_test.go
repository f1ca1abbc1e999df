package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestHumanOutput(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	newDriver(t, c, "human").deadLetter("order-42")
	tests := []struct {
		name  string
		args  []string
		wants []string
	}{
		{"Describe", []string{"describe", "order-42"}, []string{
			"Workflow:", "order-42", "Checkout", "running", "1 activity, 1 dead-lettered",
			"ACTIVITY", "ChargeCard", "dead-lettered", "1/1", "Boom: card processor said 503",
			"Attempts of 1 (ChargeCard), key order-42/1", "test-worker"}},
		{"History", []string{"history", "order-42"}, []string{
			"WorkflowExecutionStarted", "type=Checkout", `input={"n":1}`, "ActivityTaskScheduled", "activity=1 ChargeCard",
			"ActivityDeadLettered", "failure=Boom: card processor said 503", `result="sent"`}},
		{"List", []string{"list"}, []string{"WORKFLOW", "order-42", "Checkout", "running"}},
		{"DLQList", []string{"dlq", "list"}, []string{"order-42", "ChargeCard", "1/1", "Boom", "1 dead letter"}},
		{"Stats", []string{"stats"}, []string{"P99", "ChargeCard", "SendEmail"}},
		{"Watch", []string{"watch", "--snapshot"}, []string{"snapshot", "activity order-42/1 ChargeCard dead-lettered 1/1", "snapshot-done"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := wf(t, append([]string{"--addr", addr}, tt.args...)...).wantCode(t, exitOK)
			mustContain(t, r.stdout, tt.wants...)
		})
	}
}

func TestRedriveAll(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	for i := range 4 {
		newDriver(t, c, fmt.Sprintf("all-%d", i)).deadLetter(fmt.Sprintf("all-%d", i))
	}
	// A filter that matches nothing starts an operation that is done at
	// once, and says so.
	r := wf(t, "--addr", addr, "dlq", "redrive", "--all", "--failure-type", "Other").wantCode(t, exitOK)
	mustContain(t, r.stdout, "No dead letters match type:Other; nothing to redrive (op-1 completed at once · audit #")

	// A dry run lists what would go and how long the rate would take.
	r = wf(t, "--addr", addr, "dlq", "redrive", "--all", "--activity-type", "ChargeCard", "--dry-run", "--rate", "2").wantCode(t, exitOK)
	mustContain(t, r.stdout, "WORKFLOW", "all-0", "all-3", "Boom: card processor said 503",
		"would redrive 4 dead letters (act:ChargeCard) at 2/s: about 1.5s; nothing started")
	var dry dryRunDoc
	r = wf(t, "--addr", addr, "--json", "dlq", "redrive", "--all", "--dry-run", "--max-attempts", "3").wantCode(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &dry); err != nil {
		t.Fatalf("parse: %v\n%s", err, r.stdout)
	}
	if dry.Matched != 4 || len(dry.Preview) != 4 || dry.Rate != 50 || dry.Seconds != 0.06 {
		t.Fatalf("dry run = %s", r.stdout)
	}
	r = wf(t, "--addr", addr, "--json", "dlq", "redrive", "--all", "--dry-run", "--workflow", "none").wantCode(t, exitOK)
	mustContain(t, r.stdout, `"preview": []`)

	// Without --wait, wf says what it started and returns.
	r = wf(t, "--addr", addr, "dlq", "redrive", "--all", "--workflow", "all-0", "--reason", "INC-3", "--max-attempts", "3").wantCode(t, exitOK)
	mustContain(t, r.stdout, "started op-2: redriving 1 dead letter (wf:all-0) at 50/s, with max-attempts=3, at once · audit #",
		"follow it: wf ops describe op-2 · stop it: wf ops cancel op-2")
	done, err := c.WaitOperation(context.Background(), "op-2", nil)
	if err != nil || done.GetReleased() != 1 {
		t.Fatalf("op-2 = %v, %v", done, err)
	}
	if d, _ := c.Describe(context.Background(), "all-0"); d.GetPendingActivities()[0].GetMaxAttempts() != 3 {
		t.Errorf("all-0 after the edit: %v, want max attempts 3", d.GetPendingActivities()[0])
	}

	// With --wait, it follows the operation to its end: three letters at
	// 20/s go out over 100 ms.
	r = wf(t, "--addr", addr, "--json", "dlq", "redrive", "--all", "--activity-type", "ChargeCard", "--rate", "20", "--wait").wantCode(t, exitOK)
	var op durablev1.Operation
	unmarshal(t, r.stdout, &op)
	if op.GetId() != "op-3" || op.GetState() != durablev1.OperationState_OPERATION_STATE_COMPLETED || op.GetMatched() != 3 || op.GetReleased() != 3 {
		t.Fatalf("redrive --all --wait = %s", r.stdout)
	}
	if took := op.GetFinishedTime().AsTime().Sub(op.GetStartedTime().AsTime()); took < 100*time.Millisecond {
		t.Errorf("three letters at 20/s took %v, want them paced (≥ 100ms)", took)
	}
	// The first progress line says what the first look found: the
	// operation running, or already completed if 100 ms passed before it.
	if !strings.Contains(r.stderr, "op-3 running: ") && !strings.Contains(r.stderr, "op-3 completed: 3/3 released") {
		t.Errorf("redrive --all --wait showed no progress of op-3:\n%s", r.stderr)
	}
	var left durablev1.ListDeadLettersResponse
	unmarshal(t, wf(t, "--addr", addr, "--json", "dlq", "list").wantCode(t, exitOK).stdout, &left)
	if len(left.GetDeadLetters()) != 0 {
		t.Errorf("dead letters left after redrive --all: %v", left.GetDeadLetters())
	}
}

// TestOpsCommands: an operation started slowly is listed, described and
// cancelled with wf ops, as a table and as JSON; a wf that waits on it
// exits 1 when it is cancelled; a second cancel and an unknown id exit 1.
func TestOpsCommands(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	for i := range 3 {
		newDriver(t, c, fmt.Sprintf("ops-%d", i)).deadLetter(fmt.Sprintf("ops-%d", i))
	}
	// The first letter goes at once, the next a thousand seconds later.
	waited := make(chan result, 1)
	go func() {
		waited <- wf(t, "--addr", addr, "dlq", "redrive", "--all", "--rate", "0.001", "--reason", "INC-5", "--wait")
	}()
	var op *durablev1.Operation
	deadline := time.Now().Add(10 * time.Second)
	for op == nil || op.GetReleased() < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no operation released its first letter: %v", op)
		}
		time.Sleep(10 * time.Millisecond)
		if ops, err := c.ListOperations(context.Background(), 0); err == nil && len(ops) > 0 {
			op = ops[0]
		}
	}
	id := op.GetId()

	r := wf(t, "--addr", addr, "ops", "list").wantCode(t, exitOK)
	mustContain(t, r.stdout, "ID", "STATE", "PROGRESS", id, "running", "1/3 released", "0.001/s", "all", "INC-5", "1 operation")
	var list opsDoc
	r = wf(t, "--addr", addr, "--json", "ops", "list").wantCode(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Operations) != 1 {
		t.Fatalf("ops list --json = %s (%v)", r.stdout, err)
	}
	r = wf(t, "--addr", addr, "ops", "describe", id).wantCode(t, exitOK)
	mustContain(t, r.stdout, "Operation:", id, "State:", "running", "Rate:", "0.001 letters/s", "Matched:", "3", "Released:", "1", "Reason:", "INC-5")
	var described durablev1.Operation
	unmarshal(t, wf(t, "--addr", addr, "--json", "ops", "describe", id).wantCode(t, exitOK).stdout, &described)
	if described.GetId() != id || described.GetMatched() != 3 {
		t.Errorf("ops describe --json = %v", &described)
	}

	r = wf(t, "--addr", addr, "ops", "cancel", id, "--reason", "wrong idea").wantCode(t, exitOK)
	mustContain(t, r.stdout, id+" cancelled: 1 of 3 released, 2 left in the dead-letter queue; cancelled by local (wrong idea)")
	w := <-waited
	w.wantCode(t, exitFailed)
	mustContain(t, w.stdout, "started "+id, id+" cancelled: 1 of 3 released")

	r = wf(t, "--addr", addr, "--json", "ops", "cancel", id).wantCode(t, exitFailed)
	mustContain(t, r.stderr, "is cancelled", "FailedPrecondition")
	r = wf(t, "--addr", addr, "ops", "describe", "op-99").wantCode(t, exitFailed)
	mustContain(t, r.stderr, "NotFound")
	r = wf(t, "--addr", addr, "audit").wantCode(t, exitOK)
	mustContain(t, r.stdout, "cancel "+id, "kept 2/3", "wrong idea", "bulk redrive "+id, "1/3 ")
	var dl durablev1.ListDeadLettersResponse
	unmarshal(t, wf(t, "--addr", addr, "--json", "dlq", "list").wantCode(t, exitOK).stdout, &dl)
	if len(dl.GetDeadLetters()) != 2 {
		t.Errorf("%d dead letters after the cancel, want 2", len(dl.GetDeadLetters()))
	}
}

// TestRedriveOneWithEdit: the edit flags change the letter's options as it
// goes back, and wf says how.
func TestRedriveOneWithEdit(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	newDriver(t, c, "edit").deadLetter("edit-1")
	r := wf(t, "--addr", addr, "dlq", "redrive", "edit-1", "1", "--max-attempts", "4", "--start-to-close", "2m", "--non-retryable", "BadInput, Fraud").wantCode(t, exitOK)
	mustContain(t, r.stdout, `redrove edit-1/1 (ChargeCard): queued as attempt 1 with max-attempts=4 non-retryable="BadInput,Fraud" start-to-close=2m00s · audit #`)
	d, err := c.Describe(context.Background(), "edit-1")
	if err != nil {
		t.Fatal(err)
	}
	a := d.GetPendingActivities()[0]
	if a.GetMaxAttempts() != 4 || a.GetOptions().GetStartToCloseTimeout().AsDuration() != 2*time.Minute ||
		strings.Join(a.GetOptions().GetRetryPolicy().GetNonRetryable(), ",") != "BadInput,Fraud" {
		t.Errorf("after the edit: %v", a)
	}
	h, _ := c.History(context.Background(), "edit-1")
	if ev := h[len(h)-1]; ev.GetType() != durablev1.EventType_EVENT_TYPE_ACTIVITY_REDRIVEN || ev.GetEdit().GetMaxAttempts() != 4 {
		t.Errorf("last event = %v, want ActivityRedriven with the edit", ev)
	}
}

func TestStatsCheckPolicy(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	newDriver(t, c, "policy").deadLetter("policy-wf")
	// Attempts in the test take well under a second, so a generous policy
	// passes and one with a max interval above start-to-close warns.
	r := wf(t, "--addr", addr, "stats", "--type", "SendEmail", "--check-policy", "--start-to-close", "30s", "--initial", "1s", "--max-interval", "10s").wantCode(t, exitOK)
	mustContain(t, r.stdout, "Policy of SendEmail:", "start-to-close 30s (--start-to-close)", "max interval 10s (--max-interval)", "ok")
	r = wf(t, "--addr", addr, "--json", "stats", "--start-to-close", "30s", "--max-interval", "5m").wantCode(t, exitFailed)
	var doc statsDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("parse: %v\n%s", err, r.stdout)
	}
	warned := false
	for _, ch := range doc.Checks {
		warned = warned || (ch.Check == "max-interval" && ch.Result == "warn")
	}
	if !warned || len(doc.Stats) != 2 {
		t.Errorf("stats --check-policy = %s", r.stdout)
	}
}

func TestDaemonAddrFromEnv(t *testing.T) {
	// Not parallel: it sets wf's environment.
	addr, _ := setup(t)
	setEnv(t, map[string]string{"DURABLE_ADDR": addr})
	wf(t, "list").wantCode(t, exitOK)
}

// TestRedriveAllNotesTheOthersRunning: a redrive started while another runs
// says so on stderr, since letters both select go out at the sum of their
// rates; one started alone says nothing of the kind.
func TestRedriveAllNotesTheOthersRunning(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	for i := range 4 {
		newDriver(t, c, fmt.Sprintf("both-%d", i)).deadLetter(fmt.Sprintf("both-%d", i))
	}
	first := wf(t, "--addr", addr, "dlq", "redrive", "--all", "--rate", "0.1", "--reason", "INC-1").wantCode(t, exitOK)
	if strings.Contains(first.stderr, "note:") {
		t.Errorf("a redrive started alone notes another:\n%s", first.stderr)
	}
	second := wf(t, "--addr", addr, "dlq", "redrive", "--all", "--activity-type", "ChargeCard", "--rate", "0.1").wantCode(t, exitOK)
	mustContain(t, second.stdout, "started op-2")
	mustContain(t, second.stderr, "wf: note: op-1 is running too (all, started ", " by local, 0.1/s); letters both select go out at the sum of the rates: 'wf ops cancel op-1' stops it")
	for _, id := range []string{"op-1", "op-2"} {
		wf(t, "--addr", addr, "ops", "cancel", id).wantCode(t, exitOK)
	}
}
