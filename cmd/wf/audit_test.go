package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// auditRecords parses the --json document of wf audit.
func auditRecords(t *testing.T, stdout string) []*durablev1.AuditRecord {
	t.Helper()
	var doc auditDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("parse audit: %v\n%s", err, stdout)
	}
	if doc.Records == nil {
		t.Fatalf("audit --json has no records list:\n%s", stdout)
	}
	out := make([]*durablev1.AuditRecord, 0, len(doc.Records))
	for _, raw := range doc.Records {
		r := &durablev1.AuditRecord{}
		unmarshal(t, string(raw), r)
		out = append(out, r)
	}
	return out
}

func TestAuditOutput(t *testing.T) {
	t.Parallel()
	// The daemon's clock runs three hours behind, so its records are three
	// hours old to wf.
	addr := testdaemon.Start(t, engine.Options{Clock: engine.NewFakeClock(time.Now().Add(-3 * time.Hour))})
	c := dial(t, addr)
	// A queue each: a workflow task left by the first would go to the second.
	newDriver(t, c, "audit-1").deadLetter("audit-1")
	newDriver(t, c, "audit-2").deadLetter("audit-2")
	wf(t, "--addr", addr, "dlq", "redrive", "audit-1", "1", "--reason", "INC-9: card API back").wantCode(t, exitOK)
	wf(t, "--addr", addr, "dlq", "redrive", "--all", "--workflow", "audit-2", "--reason", "INC-9 the rest", "--wait").wantCode(t, exitOK)

	t.Run("Table", func(t *testing.T) {
		t.Parallel()
		r := wf(t, "--addr", addr, "audit").wantCode(t, exitOK)
		mustContain(t, r.stdout, "ID", "TIME", "PRINCIPAL", "ROLE", "ACTION", "COUNT", "SELECTION", "REASON",
			"local", "operator", "redrive", "bulk redrive", "audit-1/1", "wf:audit-2", "1/1",
			"INC-9: card API back", "INC-9 the rest", "2 audit records")
		if !regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \(3h0\dm ago\)`).MatchString(r.stdout) {
			t.Errorf("no UTC time with its age of three hours:\n%s", r.stdout)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 4 || !strings.Contains(lines[1], "bulk redrive") || !strings.Contains(lines[2], "audit-1/1") {
			t.Errorf("want the header, the bulk redrive, then the single one, then the count:\n%s", r.stdout)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		recs := auditRecords(t, wf(t, "--addr", addr, "--json", "audit").wantCode(t, exitOK).stdout)
		if len(recs) != 2 {
			t.Fatalf("%d records, want 2", len(recs))
		}
		bulk, single := recs[0], recs[1]
		if bulk.GetRpc() != "RedriveDeadLetters" || bulk.GetFilter().GetWorkflowId() != "audit-2" || bulk.GetCount() != 1 || !bulk.GetDone() {
			t.Errorf("bulk record = %v", bulk)
		}
		if single.GetRpc() != "RedriveDeadLetter" || single.GetReason() != "INC-9: card API back" || single.GetPrincipal() != "local" {
			t.Errorf("single record = %v", single)
		}
	})
	t.Run("Limit", func(t *testing.T) {
		t.Parallel()
		r := wf(t, "--addr", addr, "audit", "--limit", "1").wantCode(t, exitOK)
		mustContain(t, r.stdout, "INC-9 the rest", "1 audit record (the newest 1; --limit 0 for all)")
		if strings.Contains(r.stdout, "card API back") {
			t.Errorf("--limit 1 shows the older record:\n%s", r.stdout)
		}
	})
	t.Run("Since", func(t *testing.T) {
		t.Parallel()
		mustContain(t, wf(t, "--addr", addr, "audit", "--since", "1h").wantCode(t, exitOK).stdout, "No audit records since")
		r := wf(t, "--addr", addr, "--json", "audit", "--since", "1h").wantCode(t, exitOK)
		if recs := auditRecords(t, r.stdout); len(recs) != 0 {
			t.Errorf("--since 1h lists %d records three hours old", len(recs))
		}
		mustContain(t, r.stdout, `"records": []`)
		if recs := auditRecords(t, wf(t, "--addr", addr, "--json", "audit", "--since", "1d").wantCode(t, exitOK).stdout); len(recs) != 2 {
			t.Errorf("--since 1d lists %d records, want 2", len(recs))
		}
	})
}

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"", time.Time{}, false},
		{"24h", now.Add(-24 * time.Hour), false},
		{"90m", now.Add(-90 * time.Minute), false},
		{"7d", now.AddDate(0, 0, -7), false},
		{"1d12h", now.Add(-36 * time.Hour), false},
		{"2026-03-01T00:00:00Z", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), false},
		{"0s", time.Time{}, true},
		{"-1h", time.Time{}, true},
		{"-2d", time.Time{}, true},
		{"1.5d", time.Time{}, true},
		{"d", time.Time{}, true},
		{"yesterday", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := parseSince(tt.in, now)
		if (err != nil) != tt.err || !got.Equal(tt.want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestAuditCells(t *testing.T) {
	t.Parallel()
	ref := func(w, a string) *durablev1.ActivityRef { return &durablev1.ActivityRef{WorkflowId: w, ActivityId: a} }
	tests := []struct {
		name          string
		rec           *durablev1.AuditRecord
		action, count string
		selection     string
	}{
		{"Single", &durablev1.AuditRecord{Rpc: "RedriveDeadLetter", Matched: 1, Count: 1, Done: true, Activities: []*durablev1.ActivityRef{ref("order-42", "3")}},
			"redrive", "1/1", "order-42/3"},
		{"BulkAll", &durablev1.AuditRecord{Rpc: "RedriveDeadLetters", Filter: &durablev1.DeadLetterFilter{}, Matched: 500, Count: 500, Done: true},
			"bulk redrive", "500/500", "all"},
		{"BulkFiltered", &durablev1.AuditRecord{Rpc: "RedriveDeadLetters", Matched: 9, Count: 4,
			Filter: &durablev1.DeadLetterFilter{WorkflowId: "w", ActivityType: "ChargeCard", FailureType: "Timeout"}},
			"bulk redrive", "4/9 unfinished", "type:Timeout act:ChargeCard wf:w"},
		{"BulkListed", &durablev1.AuditRecord{Rpc: "RedriveDeadLetters", Matched: 3, Count: 3, Done: true, Activities: []*durablev1.ActivityRef{ref("a", "1"), ref("b", "1"), ref("c", "2")}},
			"bulk redrive", "3/3", "list of 3: a/1, …"},
		{"Operation", &durablev1.AuditRecord{Rpc: "RedriveDeadLetters", OperationId: "op-3", Filter: &durablev1.DeadLetterFilter{FailureFingerprint: "Timeout: after <n>s"}, Matched: 300, Count: 120},
			"bulk redrive op-3", "120/300 unfinished", `fp:"Timeout: after <n>s"`},
		{"Cancel", &durablev1.AuditRecord{Rpc: "CancelOperation", OperationId: "op-3", Filter: &durablev1.DeadLetterFilter{}, Matched: 300, Count: 180, Done: true},
			"cancel op-3", "kept 180/300", "all"},
		{"Unknown", &durablev1.AuditRecord{Rpc: "CancelWorkflow", Matched: 1, Count: 1, Done: true},
			"CancelWorkflow", "1/1", "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := auditAction(tt.rec); got != tt.action {
				t.Errorf("action = %q, want %q", got, tt.action)
			}
			if got := auditCount(tt.rec); got != tt.count {
				t.Errorf("count = %q, want %q", got, tt.count)
			}
			if got := auditSelection(tt.rec); got != tt.selection {
				t.Errorf("selection = %q, want %q", got, tt.selection)
			}
		})
	}
	var b strings.Builder
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	printAudit(&b, []*durablev1.AuditRecord{{Id: 7, Time: timestamppb.New(now.Add(-90 * time.Second)), Principal: "alice", Role: "operator",
		Rpc: "RedriveDeadLetter", Reason: "INC-1", Matched: 1, Count: 1, Done: true, Activities: []*durablev1.ActivityRef{ref("w", "1")}}}, now)
	mustContain(t, b.String(), "#7", "2026-03-10 11:58:30Z (1m30s ago)", "alice", "INC-1")
}

func TestPrintEvent_AuditRecord(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := printEvent(&b, &durablev1.WatchEvent{
		Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		AuditRecords: []*durablev1.AuditRecord{{Id: 50, Principal: "ops", Role: "operator", Rpc: "RedriveDeadLetters",
			Filter: &durablev1.DeadLetterFilter{FailureType: "Timeout"}, Matched: 6, Count: 2, Reason: "INC-4"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.String(), "upsert", "audit #50 ops (operator) bulk redrive 2/6 unfinished type:Timeout reason: INC-4")
}

func TestPrintEvent_Operation(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	err := printEvent(&b, &durablev1.WatchEvent{
		Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		Operations: []*durablev1.Operation{{Id: "op-3", State: durablev1.OperationState_OPERATION_STATE_RUNNING,
			Filter: &durablev1.DeadLetterFilter{FailureType: "Timeout"}, Matched: 300, Released: 120, Skipped: 2, ReDeadLettered: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.String(), "upsert", "operation op-3 running 120/300 released · 2 skipped · 1 dead again type:Timeout")
}

func TestPrintEvent_Writes(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	refused := &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE,
		Writes: &durablev1.WritesState{Refused: true, Reason: "not enough disk space: 3 MiB free", Since: timestamppb.Now()}}
	if err := printEvent(&b, refused); err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.String(), "snapshot-done", "writes refused since ", ": not enough disk space: 3 MiB free")
	b.Reset()
	// Accepted in a snapshot says nothing; accepted in an upsert is news.
	if err := printEvent(&b, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE, Writes: &durablev1.WritesState{}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "writes") {
		t.Errorf("a snapshot with writes accepted printed %q", b.String())
	}
	b.Reset()
	if err := printEvent(&b, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, Writes: &durablev1.WritesState{}}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.String(), "upsert", "writes accepted again")
}
