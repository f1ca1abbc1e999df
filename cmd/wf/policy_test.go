package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestPolicySetListClear(t *testing.T) {
	t.Parallel()
	addr, _ := setup(t)
	policy := func(args ...string) result {
		return wf(t, append([]string{"--addr", addr, "policy"}, args...)...)
	}

	r := policy("list", "--json").wantCode(t, exitOK)
	if !strings.Contains(r.stdout, `"overrides": []`) {
		t.Errorf("list --json with no overrides = %s, want an empty list", r.stdout)
	}
	mustContain(t, policy("list").wantCode(t, exitOK).stdout, "No policy overrides")

	r = policy("set", "ChargeCard", "--max-attempts", "6", "--initial", "30s", "--reason", "INC-7: card API flapping").wantCode(t, exitOK)
	mustContain(t, r.stdout, "policy override of ChargeCard on every task queue set: initial=30s max-attempts=6 · audit #",
		"from their next decision")
	r = policy("set", "ChargeCard", "--task-queue", "eu", "--start-to-close", "2m", "--non-retryable", "", "--reason", "INC-7 EU").wantCode(t, exitOK)
	mustContain(t, r.stdout, "ChargeCard on task queue eu", `non-retryable="" start-to-close=2m00s`)

	var set durablev1.PolicyOverride
	unmarshal(t, policy("set", "SendEmail", "--heartbeat-timeout", "10s", "--reason", "INC-8", "--json").wantCode(t, exitOK).stdout, &set)
	if set.GetActivityType() != "SendEmail" || set.GetPatch().GetHeartbeatTimeout().AsDuration() != 10*time.Second || set.GetPrincipal() != "local" {
		t.Errorf("set --json = %v", &set)
	}

	r = policy("list").wantCode(t, exitOK)
	mustContain(t, r.stdout, "TYPE", "TASK QUEUE", "OVERRIDES", "BY", "REASON",
		"(all)", "eu", "initial=30s max-attempts=6", "INC-7: card API flapping", "local", "3 policy overrides")
	var doc policyListDoc
	if err := json.Unmarshal([]byte(policy("list", "--json").wantCode(t, exitOK).stdout), &doc); err != nil || len(doc.Overrides) != 3 {
		t.Fatalf("list --json: %v, %d overrides", err, len(doc.Overrides))
	}
	var first durablev1.PolicyOverride
	unmarshal(t, string(doc.Overrides[0]), &first)
	if first.GetActivityType() != "ChargeCard" || first.GetTaskQueue() != "" || first.GetPatch().GetMaxAttempts() != 6 {
		t.Errorf("first override listed = %v, want ChargeCard on every queue", &first)
	}

	r = wf(t, "--addr", addr, "watch", "--snapshot").wantCode(t, exitOK)
	mustContain(t, r.stdout, "snapshot      policy override of ChargeCard on every task queue: initial=30s max-attempts=6 by local")

	r = policy("clear", "ChargeCard", "--task-queue", "eu", "--reason", "INC-7 EU over").wantCode(t, exitOK)
	mustContain(t, r.stdout, "policy override of ChargeCard on task queue eu cleared (it set", "audit #")
	var cleared durablev1.ClearPolicyOverrideResponse
	unmarshal(t, policy("clear", "SendEmail", "--reason", "INC-8 over", "--json").wantCode(t, exitOK).stdout, &cleared)
	if cleared.GetCleared().GetActivityType() != "SendEmail" || cleared.GetAuditId() == 0 {
		t.Errorf("clear --json = %v", &cleared)
	}
	r = policy("clear", "SendEmail", "--reason", "again").wantCode(t, exitFailed)
	mustContain(t, r.stderr, "NotFound")

	r = wf(t, "--addr", addr, "audit").wantCode(t, exitOK)
	mustContain(t, r.stdout, "policy set", "policy clear", "ChargeCard on every task queue: initial=30s max-attempts=6", "INC-7 EU over")
}

func TestPolicyUsage(t *testing.T) {
	t.Parallel()
	down := closedAddr(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"NoSubcommand", []string{"policy"}, "want a subcommand"},
		{"UnknownSubcommand", []string{"policy", "show"}, "unknown subcommand"},
		{"SetWithoutType", []string{"policy", "set", "--max-attempts", "3", "--reason", "r"}, "TYPE"},
		{"SetWithoutFields", []string{"policy", "set", "Charge", "--reason", "r"}, "at least one field"},
		{"SetWithoutReason", []string{"policy", "set", "Charge", "--max-attempts", "3"}, "--reason is required"},
		{"SetNegativeTimeout", []string{"policy", "set", "Charge", "--start-to-close", "-1s", "--reason", "r"}, "--start-to-close"},
		{"SetSubMillisecondInitial", []string{"policy", "set", "Charge", "--initial", "1500us", "--reason", "r"}, "whole number of milliseconds"},
		{"ClearWithoutReason", []string{"policy", "clear", "Charge"}, "--reason is required"},
		{"ListWithArgument", []string{"policy", "list", "Charge"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := wf(t, append([]string{"--addr", down}, tt.args...)...).wantCode(t, exitUsage)
			mustContain(t, r.stderr, tt.want)
		})
	}
	r := wf(t, "policy", "--help").wantCode(t, exitOK)
	mustContain(t, r.stdout, "wf policy set TYPE", "--max-attempts N", "--schedule-to-close DUR", "Examples:", "wf policy clear ChargeCard")
	r = wf(t, "policy", "set", "--help").wantCode(t, exitOK)
	mustContain(t, r.stdout, "-task-queue", "-heartbeat-timeout", "-reason")
	wf(t, "--addr", down, "policy", "list").wantCode(t, exitUnreachable)
}

func TestDescribeShowsThePolicyInForce(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	newDriver(t, c, "describe-policy").deadLetter("order-7")
	wf(t, "--addr", addr, "policy", "set", "ChargeCard", "--max-attempts", "6", "--start-to-close", "20s",
		"--reason", "INC-7: card API flapping").wantCode(t, exitOK)

	r := wf(t, "--addr", addr, "describe", "order-7").wantCode(t, exitOK)
	mustContain(t, r.stdout, "Policy in force of 1 (ChargeCard):",
		`max attempts 6 (override by local: "INC-7: card API flapping")`,
		"start-to-close 20s (override)", "initial 1s · backoff ×2 · max interval 1m00s",
		"ChargeCard", "dead-lettered", "1/6",
		"  schedule: gave up after attempt 1; a redrive starts again at attempt 1")
	if n := strings.Count(r.stdout, "(override"); n != 2 {
		t.Errorf("%d fields marked as overridden, want the two the override sets:\n%s", n, r.stdout)
	}

	var d durablev1.DescribeWorkflowResponse
	unmarshal(t, wf(t, "--addr", addr, "--json", "describe", "order-7").wantCode(t, exitOK).stdout, &d)
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityType() != "ChargeCard" {
			continue
		}
		if !slices.Equal(a.GetOverriddenFields(), []string{"retry_policy.max_attempts", "start_to_close_timeout"}) ||
			a.GetOptionsInForce().GetStartToCloseTimeout().AsDuration() != 20*time.Second || a.GetOptions().GetRetryPolicy().GetMaxAttempts() != 1 {
			t.Errorf("describe --json ChargeCard: in force %v, fields %q, code's %v", a.GetOptionsInForce(), a.GetOverriddenFields(), a.GetOptions())
		}
	}
}

func TestStatsSinceAndThePolicyInForce(t *testing.T) {
	t.Parallel()
	// Three days ago on the daemon's clock, a checkout; today another.
	clock := engine.NewFakeClock(time.Now().Add(-72 * time.Hour))
	addr := testdaemon.Start(t, engine.Options{Clock: clock})
	c := dial(t, addr)
	newDriver(t, c, "stats-old").deadLetter("old")
	clock.Set(time.Now())
	newDriver(t, c, "stats-new").deadLetter("new")

	attempts := func(args ...string) map[string]int64 {
		t.Helper()
		var doc statsDoc
		r := wf(t, append([]string{"--addr", addr, "--json", "stats"}, args...)...).wantCode(t, exitOK)
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("parse: %v\n%s", err, r.stdout)
		}
		out := map[string]int64{}
		for _, raw := range doc.Stats {
			var s durablev1.ActivityTypeStats
			unmarshal(t, string(raw), &s)
			out[s.GetActivityType()] = s.GetAttempts()
		}
		return out
	}
	if got := attempts(); got["ChargeCard"] != 2 || got["SendEmail"] != 2 {
		t.Errorf("all attempts = %v, want 2 of each", got)
	}
	if got := attempts("--since", "1d"); got["ChargeCard"] != 1 || got["SendEmail"] != 1 {
		t.Errorf("attempts of the last day = %v, want 1 of each", got)
	}
	if got := attempts("--since", "7d"); got["ChargeCard"] != 2 {
		t.Errorf("attempts of the last week = %v, want 2 of ChargeCard", got)
	}
	r := wf(t, "--addr", addr, "stats", "--since", "36h").wantCode(t, exitOK)
	mustContain(t, r.stdout, "Attempts that ended since ", "ChargeCard")
	wf(t, "--addr", addr, "stats", "--since", "3x").wantCode(t, exitUsage)

	// The policy in force is checked without flags: an override of the
	// max interval past start-to-close warns, and says it came from the
	// override; a flag asks what if.
	wf(t, "--addr", addr, "policy", "set", "ChargeCard", "--max-interval", "5m", "--reason", "test").wantCode(t, exitOK)
	r = wf(t, "--addr", addr, "stats", "--type", "ChargeCard", "--check-policy").wantCode(t, exitFailed)
	mustContain(t, r.stdout, "Policy of ChargeCard: start-to-close 1m00s · 1 attempt · initial 1s · backoff ×2 · max interval 5m00s (override)",
		"max-interval", "warn")
	r = wf(t, "--addr", addr, "--json", "stats", "--type", "ChargeCard", "--max-interval", "30s").wantCode(t, exitOK)
	var doc statsDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Policies) != 1 || !slices.Equal(doc.Policies[0].WhatIfFields, []string{"retry_policy.max_interval_ms"}) ||
		!slices.Equal(doc.Policies[0].OverriddenFields, []string{}) {
		t.Errorf("what-if policies = %+v, want max interval from the flag, over the override's", doc.Policies)
	}
	r = wf(t, "--addr", addr, "stats", "--check-policy", "--since", "1d", "--type", "SendEmail").wantCode(t, exitOK)
	mustContain(t, r.stdout, "Policy of SendEmail: start-to-close 1m00s · 1 attempt", "ok")
}
