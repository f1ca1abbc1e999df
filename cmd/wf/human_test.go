package main

import (
	"encoding/json"
	"fmt"
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
	// A filter that matches nothing redrives nothing, and says so.
	r := wf(t, "--addr", addr, "dlq", "redrive", "--all", "--failure-type", "Other").wantCode(t, exitOK)
	mustContain(t, r.stdout, "No dead letters match failure-type=Other", "audit #")

	r = wf(t, "--addr", addr, "dlq", "redrive", "--all", "--workflow", "all-0", "--reason", "INC-3").wantCode(t, exitOK)
	mustContain(t, r.stdout, "redrove all-0/1 (ChargeCard)\n", "redrove 1 of 1 dead letter (0 skipped) · audit #")
	mustContain(t, r.stderr, "redriving the dead letters with workflow=all-0, paced by the daemon")

	start := time.Now()
	r = wf(t, "--addr", addr, "--json", "dlq", "redrive", "--all", "--activity-type", "ChargeCard", "--rate", "20").wantCode(t, exitOK)
	var doc redriveDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("parse: %v\n%s", err, r.stdout)
	}
	if len(doc.Redriven) != 3 || len(doc.Failed) != 0 || doc.Matched != 3 || doc.Count != 3 || doc.Skipped != 0 || doc.AuditID == 0 {
		t.Fatalf("redrive --all = %s", r.stdout)
	}
	seen := map[string]bool{}
	for _, raw := range doc.Redriven {
		var ref durablev1.ActivityRef
		unmarshal(t, string(raw), &ref)
		seen[ref.GetWorkflowId()+"/"+ref.GetActivityId()] = true
	}
	if !seen["all-1/1"] || !seen["all-2/1"] || !seen["all-3/1"] {
		t.Errorf("redriven = %v", seen)
	}
	if r.stderr != "" {
		t.Errorf("stderr with --json: %s", r.stderr)
	}
	// Three letters at 20/s are released 50 ms apart.
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Errorf("redrive --all took %v, want it paced (≥ 100ms)", el)
	}
	var left durablev1.ListDeadLettersResponse
	unmarshal(t, wf(t, "--addr", addr, "--json", "dlq", "list").wantCode(t, exitOK).stdout, &left)
	if len(left.GetDeadLetters()) != 0 {
		t.Errorf("dead letters left after redrive --all: %v", left.GetDeadLetters())
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
