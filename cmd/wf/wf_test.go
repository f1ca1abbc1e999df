package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// unmarshal parses s as protojson into m, failing the test otherwise.
func unmarshal(t *testing.T, s string, m proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal([]byte(s), m); err != nil {
		t.Fatalf("parse %T: %v\n%s", m, err, s)
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	newDriver(t, c, "codes").deadLetter("codes-wf")
	down := closedAddr(t)
	tests := []struct {
		name string
		args []string
		code int
		err  string // a fragment of stderr
	}{
		{"Help", []string{"--help"}, exitOK, ""},
		{"HelpCommand", []string{"help", "dlq"}, exitOK, ""},
		{"StartHelp", []string{"start", "--help"}, exitOK, ""},
		{"DLQHelp", []string{"dlq", "--help"}, exitOK, ""},
		{"DLQListHelp", []string{"dlq", "list", "-h"}, exitOK, ""},
		{"DescribeOK", []string{"--addr", addr, "describe", "codes-wf"}, exitOK, ""},
		{"NoCommand", nil, exitUsage, ""},
		{"UnknownCommand", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"BadGlobalFlag", []string{"--bogus", "list"}, exitUsage, "bogus"},
		{"StartWithoutType", []string{"--addr", addr, "start"}, exitUsage, "TYPE"},
		{"UnknownFlagBeforeType", []string{"--addr", addr, "start", "--bogus", "X"}, exitUsage, "bogus"},
		{"BadInput", []string{"--addr", addr, "start", "X", "--input", "{nope"}, exitUsage, "--input"},
		{"DescribeWithoutID", []string{"--addr", addr, "describe"}, exitUsage, "WORKFLOW_ID"},
		{"DescribeTwoIDs", []string{"--addr", addr, "describe", "a", "b"}, exitUsage, "WORKFLOW_ID"},
		{"BadStatus", []string{"--addr", addr, "list", "--status", "sleeping"}, exitUsage, "sleeping"},
		{"BadTimeout", []string{"list", "--timeout", "soon"}, exitUsage, "timeout"},
		{"DLQWithoutSubcommand", []string{"dlq"}, exitUsage, "list or redrive"},
		{"DLQUnknownSubcommand", []string{"dlq", "purge"}, exitUsage, "purge"},
		{"RedriveOneArg", []string{"--addr", addr, "dlq", "redrive", "codes-wf"}, exitUsage, "ACTIVITY_ID"},
		{"RedriveAllAndIDs", []string{"--addr", addr, "dlq", "redrive", "--all", "a", "b"}, exitUsage, "not both"},
		{"RedriveFilterWithoutAll", []string{"--addr", addr, "dlq", "redrive", "--workflow", "a", "a", "1"}, exitUsage, "--all"},
		{"RedriveRateWithoutAll", []string{"--addr", addr, "dlq", "redrive", "a", "1", "--rate", "5"}, exitUsage, "--all"},
		{"RedriveZeroRate", []string{"--addr", addr, "dlq", "redrive", "--all", "--rate", "0"}, exitUsage, "--rate must be more than 0"},
		{"RedriveRateTooHigh", []string{"--addr", addr, "dlq", "redrive", "--all", "--rate", "100001"}, exitUsage, "at most 100000"},
		{"RedriveDryRunWithoutAll", []string{"--addr", addr, "dlq", "redrive", "a", "1", "--dry-run"}, exitUsage, "only apply with --all"},
		{"RedriveWaitWithoutAll", []string{"--addr", addr, "dlq", "redrive", "a", "1", "--wait"}, exitUsage, "only apply with --all"},
		{"RedriveDryRunAndWait", []string{"--addr", addr, "dlq", "redrive", "--all", "--dry-run", "--wait"}, exitUsage, "not both"},
		{"RedriveNegativeMaxAttempts", []string{"--addr", addr, "dlq", "redrive", "a", "1", "--max-attempts", "-1"}, exitUsage, "--max-attempts"},
		{"RedriveNegativeTimeout", []string{"--addr", addr, "dlq", "redrive", "--all", "--start-to-close", "-1s"}, exitUsage, "--start-to-close must not be negative"},
		{"RedriveBackoffNaN", []string{"--addr", addr, "dlq", "redrive", "--all", "--backoff", "NaN"}, exitUsage, "--backoff"},
		{"RedriveBadDeadAfter", []string{"--addr", addr, "dlq", "redrive", "--all", "--dead-after", "yesterday"}, exitUsage, "dead-after"},
		{"RedriveWindowBackwards", []string{"--addr", addr, "dlq", "redrive", "--all", "--dead-after", "1h", "--dead-before", "2h"}, exitUsage, "--dead-before must be later than --dead-after"},
		{"DLQListBadDeadBefore", []string{"--addr", addr, "dlq", "list", "--dead-before", "soon"}, exitUsage, "dead-before"},
		{"OpsHelp", []string{"ops", "--help"}, exitOK, ""},
		{"OpsListHelp", []string{"ops", "list", "--help"}, exitOK, ""},
		{"OpsWithoutSubcommand", []string{"ops"}, exitUsage, "list, describe or cancel"},
		{"OpsUnknownSubcommand", []string{"ops", "retry"}, exitUsage, "retry"},
		{"OpsDescribeWithoutID", []string{"--addr", addr, "ops", "describe"}, exitUsage, "OPERATION_ID"},
		{"OpsCancelTwoIDs", []string{"--addr", addr, "ops", "cancel", "op-1", "op-2"}, exitUsage, "OPERATION_ID"},
		{"OpsListNegativeLimit", []string{"--addr", addr, "ops", "list", "--limit", "-1"}, exitUsage, "--limit"},
		{"OpsDescribeUnknown", []string{"--addr", addr, "ops", "describe", "op-404"}, exitFailed, "NotFound"},
		{"OpsCancelUnknown", []string{"--addr", addr, "ops", "cancel", "nonsense"}, exitFailed, "NotFound"},
		{"DownOps", []string{"ops", "list", "--addr", down}, exitUnreachable, "unreachable"},
		{"AuditHelp", []string{"audit", "--help"}, exitOK, ""},
		{"AuditBadSince", []string{"--addr", addr, "audit", "--since", "soon"}, exitUsage, "--since"},
		{"AuditNegativeSince", []string{"--addr", addr, "audit", "--since", "-1h"}, exitUsage, "positive"},
		{"AuditNegativeLimit", []string{"--addr", addr, "audit", "--limit", "-1"}, exitUsage, "--limit"},
		{"AuditArgument", []string{"--addr", addr, "audit", "x"}, exitUsage, "unexpected argument"},
		{"DescribeUnknown", []string{"--addr", addr, "describe", "no-such-workflow"}, exitFailed, "NotFound"},
		{"HistoryUnknown", []string{"--addr", addr, "history", "no-such-workflow"}, exitFailed, "NotFound"},
		{"RedriveNotDead", []string{"--addr", addr, "dlq", "redrive", "codes-wf", "2"}, exitFailed, "redrive codes-wf/2"},
		{"RedriveUnknown", []string{"--addr", addr, "dlq", "redrive", "no-such-workflow", "1"}, exitFailed, "redrive"},
		{"StartDuplicate", []string{"--addr", addr, "start", "Checkout", "--id", "codes-wf"}, exitFailed, "codes-wf"},
		{"DownDescribe", []string{"--addr", down, "describe", "x"}, exitUnreachable, "unreachable"},
		{"DownList", []string{"--addr", down, "list"}, exitUnreachable, "is durabled running?"},
		{"DownStart", []string{"start", "X", "--addr", down, "--wait"}, exitUnreachable, "unreachable"},
		{"DownDLQ", []string{"dlq", "list", "--addr", down, "--json"}, exitUnreachable, "unreachable"},
		{"DownWatch", []string{"watch", "--addr", down}, exitUnreachable, "unreachable"},
		{"DownStats", []string{"stats", "--addr", down}, exitUnreachable, "unreachable"},
		{"DownAudit", []string{"audit", "--addr", down}, exitUnreachable, "unreachable"},
		{"DownRedriveAll", []string{"dlq", "redrive", "--all", "--addr", down}, exitUnreachable, "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := wf(t, tt.args...).wantCode(t, tt.code)
			if tt.err != "" {
				mustContain(t, r.stderr, tt.err)
			}
			if tt.code != exitOK && tt.name != "NoCommand" && strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
				t.Errorf("stderr is not one line:\n%s", r.stderr)
			}
			if tt.code == exitOK && r.stderr != "" {
				t.Errorf("stderr on success:\n%s", r.stderr)
			}
		})
	}
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	newDriver(t, c, "json").deadLetter("json-wf")

	t.Run("Start", func(t *testing.T) {
		r := wf(t, "--addr", addr, "--json", "start", "FlakyDemo", "--id", "json-start", "--fail-rate", "0.5", "--activities", "3").wantCode(t, exitOK)
		var doc startDoc
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("parse start: %v\n%s", err, r.stdout)
		}
		if doc.WorkflowID != "json-start" || doc.WorkflowType != "FlakyDemo" || doc.TaskQueue != "default" {
			t.Errorf("start doc = %+v", doc)
		}
		var in bytes.Buffer
		if err := json.Compact(&in, doc.Input); err != nil || in.String() != `{"activities":3,"fail_rate":0.5}` {
			t.Errorf("input = %s", doc.Input)
		}
		var started durablev1.DescribeWorkflowResponse
		unmarshal(t, wf(t, "--addr", addr, "--json", "describe", "json-start").wantCode(t, exitOK).stdout, &started)
		if s := started.GetWorkflow().GetStatus(); s != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
			t.Errorf("started workflow status %v", s)
		}
	})
	t.Run("Describe", func(t *testing.T) {
		var resp durablev1.DescribeWorkflowResponse
		unmarshal(t, wf(t, "--addr", addr, "describe", "json-wf", "--json").wantCode(t, exitOK).stdout, &resp)
		if resp.GetWorkflow().GetWorkflowType() != "Checkout" {
			t.Errorf("workflow = %v", resp.GetWorkflow())
		}
		pending := resp.GetPendingActivities()
		if len(pending) != 1 || pending[0].GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED || pending[0].GetLastFailure().GetType() != "Boom" {
			t.Errorf("pending = %v", pending)
		}
	})
	t.Run("History", func(t *testing.T) {
		var resp durablev1.GetWorkflowHistoryResponse
		unmarshal(t, wf(t, "--addr", addr, "--json", "history", "json-wf").wantCode(t, exitOK).stdout, &resp)
		var types []durablev1.EventType
		for _, e := range resp.GetEvents() {
			types = append(types, e.GetType())
		}
		if len(types) == 0 || types[0] != durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
			t.Fatalf("events = %v", types)
		}
		found := false
		for _, ty := range types {
			found = found || ty == durablev1.EventType_EVENT_TYPE_ACTIVITY_DEAD_LETTERED
		}
		if !found {
			t.Errorf("no ActivityDeadLettered in %v", types)
		}
	})
	t.Run("List", func(t *testing.T) {
		var resp durablev1.ListWorkflowsResponse
		unmarshal(t, wf(t, "--addr", addr, "--json", "list", "--status", "running").wantCode(t, exitOK).stdout, &resp)
		ids := map[string]bool{}
		for _, w := range resp.GetWorkflows() {
			ids[w.GetWorkflowId()] = true
			if w.GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
				t.Errorf("%s is %v in a running list", w.GetWorkflowId(), w.GetStatus())
			}
		}
		if !ids["json-wf"] {
			t.Errorf("json-wf missing from %v", ids)
		}
		unmarshal(t, wf(t, "--addr", addr, "--json", "list", "--status", "failed").wantCode(t, exitOK).stdout, &resp)
		if len(resp.GetWorkflows()) != 0 {
			t.Errorf("failed workflows: %v", resp.GetWorkflows())
		}
	})
	t.Run("DLQList", func(t *testing.T) {
		var resp durablev1.ListDeadLettersResponse
		unmarshal(t, wf(t, "--addr", addr, "--json", "dlq", "list", "--activity-type", "ChargeCard").wantCode(t, exitOK).stdout, &resp)
		if len(resp.GetDeadLetters()) != 1 || resp.GetDeadLetters()[0].GetWorkflowId() != "json-wf" {
			t.Errorf("dead letters = %v", resp.GetDeadLetters())
		}
		unmarshal(t, wf(t, "--addr", addr, "--json", "dlq", "list", "--failure-type", "Other").wantCode(t, exitOK).stdout, &resp)
		if len(resp.GetDeadLetters()) != 0 {
			t.Errorf("filtered dead letters = %v", resp.GetDeadLetters())
		}
	})
	t.Run("Stats", func(t *testing.T) {
		r := wf(t, "--addr", addr, "--json", "stats").wantCode(t, exitOK)
		var doc struct {
			Stats []json.RawMessage `json:"stats"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("parse stats: %v\n%s", err, r.stdout)
		}
		types := map[string]int64{}
		for _, raw := range doc.Stats {
			var s durablev1.ActivityTypeStats
			unmarshal(t, string(raw), &s)
			types[s.GetActivityType()] = s.GetAttempts()
		}
		if types["ChargeCard"] != 1 || types["SendEmail"] != 1 {
			t.Errorf("attempts per type = %v", types)
		}
	})
	t.Run("Watch", func(t *testing.T) {
		r := wf(t, "--addr", addr, "--json", "watch", "--snapshot").wantCode(t, exitOK)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		var last durablev1.WatchEvent
		for _, l := range lines {
			unmarshal(t, l, &last)
		}
		if last.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
			t.Errorf("last event %v, want SNAPSHOT_DONE", last.GetKind())
		}
		mustContain(t, r.stdout, `"json-wf"`)
	})
	// Redrive last: it changes what the others see.
	t.Run("Redrive", func(t *testing.T) {
		r := wf(t, "--addr", addr, "--json", "dlq", "redrive", "json-wf", "1").wantCode(t, exitOK)
		var doc redriveDoc
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatalf("parse redrive: %v\n%s", err, r.stdout)
		}
		if len(doc.Redriven) != 1 || len(doc.Failed) != 0 || doc.Matched != 1 || doc.Count != 1 {
			t.Fatalf("redrive doc = %s", r.stdout)
		}
		var a durablev1.PendingActivity
		unmarshal(t, string(doc.Redriven[0]), &a)
		if a.GetActivityId() != "1" || a.GetAttempt() != 1 || a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED {
			t.Errorf("redriven activity = %v", &a)
		}
		wf(t, "--addr", addr, "dlq", "redrive", "json-wf", "1").wantCode(t, exitFailed)
	})
}
