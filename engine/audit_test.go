package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

var alice = engine.Actor{Principal: "alice", Role: "operator"}

// deadLetter starts workflow wf with one activity that dead-letters on its
// first failure, of type failureType.
func (h *harness) deadLetter(wf, failureType string) {
	h.t.Helper()
	h.startWithActivity(wf, &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 1}})
	task := h.pollActivity()
	if task == nil {
		h.t.Fatalf("%s: no activity to fail", wf)
	}
	h.fail(task, &durablev1.Failure{Type: failureType, Message: "down"})
}

func (h *harness) audit() []*durablev1.AuditRecord {
	h.t.Helper()
	r, err := h.e.ListAuditRecords(context.Background(), &durablev1.ListAuditRecordsRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	return r.GetRecords()
}

// TestRedriveIsAudited: a redrive writes an audit record with who, why and
// what, and its ActivityRedriven event names the principal and the reason; a
// redrive that fails writes no record.
func TestRedriveIsAudited(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.deadLetter("wf-1", "Unavailable")
	ctx := context.Background()
	if _, err := h.e.RedriveDeadLetter(ctx, alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf-1", ActivityId: "2", Reason: "typo"}); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("redrive of an unknown activity: %v", err)
	}
	if _, err := h.e.RedriveDeadLetter(ctx, alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: "wf-1", ActivityId: "1", Reason: "INC-42 fixed"}); err != nil {
		t.Fatal(err)
	}
	recs := h.audit()
	if len(recs) != 1 {
		t.Fatalf("audit log = %v, want exactly the one redrive that happened", recs)
	}
	r := recs[0]
	if r.GetPrincipal() != "alice" || r.GetRole() != "operator" || r.GetRpc() != "RedriveDeadLetter" || r.GetReason() != "INC-42 fixed" ||
		r.GetCount() != 1 || r.GetMatched() != 1 || !r.GetDone() || !r.GetTime().AsTime().Equal(t0) ||
		len(r.GetActivities()) != 1 || r.GetActivities()[0].GetWorkflowId() != "wf-1" || r.GetActivities()[0].GetActivityId() != "1" {
		t.Errorf("audit record = %v", r)
	}
	var ev *durablev1.HistoryEvent
	for _, e := range h.history("wf-1") {
		if e.GetType() == evRedriven {
			ev = e
		}
	}
	if ev.GetPrincipal() != "alice" || ev.GetReason() != "INC-42 fixed" {
		t.Errorf("ActivityRedriven event = %v, want principal alice and the reason", ev)
	}
}

// TestAuditPagesAndSince: the log reads newest first, in pages, and since
// ends it at the first older record.
func TestAuditPagesAndSince(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	ctx := context.Background()
	for _, wf := range []string{"a", "b", "c"} {
		h.deadLetter(wf, "X")
	}
	for i, wf := range []string{"a", "b", "c"} {
		h.clock.Set(t0.Add(time.Duration(i) * time.Hour))
		if _, err := h.e.RedriveDeadLetter(ctx, alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: wf, ActivityId: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	p1, err := h.e.ListAuditRecords(ctx, &durablev1.ListAuditRecordsRequest{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := h.e.ListAuditRecords(ctx, &durablev1.ListAuditRecordsRequest{PageSize: 2, NextPageToken: p1.GetNextPageToken()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range append(p1.GetRecords(), p2.GetRecords()...) {
		got = append(got, r.GetActivities()[0].GetWorkflowId())
	}
	if len(got) != 3 || got[0] != "c" || got[1] != "b" || got[2] != "a" || len(p2.GetNextPageToken()) != 0 {
		t.Errorf("pages = %v (next token %q), want c b a and no more", got, p2.GetNextPageToken())
	}
	since, err := h.e.ListAuditRecords(ctx, &durablev1.ListAuditRecordsRequest{Since: timestamppb.New(t0.Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(since.GetRecords()); n != 2 {
		t.Errorf("since +1h: %d records, want 2", n)
	}
}

// TestAuditRetention: the janitor deletes records older than the retention.
func TestAuditRetention(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{AuditRetention: 2 * time.Hour})
	h.deadLetter("a", "X")
	if _, err := h.e.RedriveDeadLetter(context.Background(), alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: "a", ActivityId: "1"}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Hour) // the janitor looks, the record is 1 h old
	if len(h.audit()) != 1 {
		t.Fatal("a record inside its retention is gone")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(h.audit()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a record past its retention was not deleted")
		}
		h.clock.Advance(time.Hour)
		time.Sleep(time.Millisecond)
	}
}
