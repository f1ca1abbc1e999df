package engine_test

import (
	"context"
	"errors"
	"runtime"
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

// bulkRedrive runs RedriveDeadLetters as alice, moving the fake clock on
// until it returns.
func (h *harness) bulkRedrive(req *durablev1.RedriveDeadLettersRequest) (*durablev1.RedriveDeadLettersResponse, error) {
	h.t.Helper()
	type result struct {
		resp *durablev1.RedriveDeadLettersResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := h.e.RedriveDeadLetters(context.Background(), alice, req)
		done <- result{resp, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case r := <-done:
			return r.resp, r.err
		default:
		}
		if time.Now().After(deadline) {
			h.t.Fatal("bulk redrive did not finish")
		}
		h.clock.Advance(10 * time.Millisecond)
		runtime.Gosched()
	}
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

// TestBulkRedriveReleasesAtItsRate: letter i goes back i/rate seconds after
// the first, each in a transaction that advances one audit record, which
// ends done with the count and the filter it selected with.
func TestBulkRedriveReleasesAtItsRate(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	for _, wf := range []string{"a", "b", "c", "d"} {
		h.deadLetter(wf, "Unavailable")
	}
	h.deadLetter("other", "BadInput")
	start := h.clock.Now()
	resp, err := h.bulkRedrive(&durablev1.RedriveDeadLettersRequest{
		Filter: &durablev1.DeadLetterFilter{FailureType: "Unavailable"}, Rate: 10, Reason: "outage over",
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetMatched() != 4 || resp.GetCount() != 4 || len(resp.GetRedriven()) != 4 || resp.GetSkipped() != 0 {
		t.Fatalf("response = %v, want 4 of 4 redriven", resp)
	}
	for i, ref := range resp.GetRedriven() {
		var at time.Time
		for _, e := range h.history(ref.GetWorkflowId()) {
			if e.GetType() == evRedriven {
				at = e.GetTime().AsTime()
				if e.GetPrincipal() != "alice" || e.GetReason() != "outage over" {
					t.Errorf("%s: ActivityRedriven = %v", ref.GetWorkflowId(), e)
				}
			}
		}
		if due := start.Add(time.Duration(i) * 100 * time.Millisecond); at.Before(due) {
			t.Errorf("letter %d (%s) released at +%v, before its due +%v", i, ref.GetWorkflowId(), at.Sub(start), due.Sub(start))
		}
	}
	if dl, _ := h.e.ListDeadLetters(context.Background(), &durablev1.ListDeadLettersRequest{}); len(dl.GetDeadLetters()) != 1 || dl.GetDeadLetters()[0].GetWorkflowId() != "other" {
		t.Errorf("left in the DLQ: %v, want only the letter the filter did not match", dl.GetDeadLetters())
	}
	recs := h.audit()
	if len(recs) != 1 {
		t.Fatalf("audit log = %v, want one record for the whole call", recs)
	}
	r := recs[0]
	if r.GetId() != resp.GetAuditId() || r.GetRpc() != "RedriveDeadLetters" || r.GetFilter().GetFailureType() != "Unavailable" ||
		r.GetMatched() != 4 || r.GetCount() != 4 || !r.GetDone() || len(r.GetActivities()) != 4 || r.GetReason() != "outage over" {
		t.Errorf("audit record = %v", r)
	}
}

// TestBulkRedriveSkipsWhatIsNoLongerDead: a listed letter redriven meanwhile
// is skipped, not redriven twice, and the record still ends done.
func TestBulkRedriveSkipsWhatIsNoLongerDead(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.deadLetter("a", "X")
	h.deadLetter("b", "X")
	ctx := context.Background()
	if _, err := h.e.RedriveDeadLetter(ctx, alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: "b", ActivityId: "1"}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.bulkRedrive(&durablev1.RedriveDeadLettersRequest{
		Activities: []*durablev1.ActivityRef{{WorkflowId: "a", ActivityId: "1"}, {WorkflowId: "a", ActivityId: "1"}, {WorkflowId: "b", ActivityId: "1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetMatched() != 2 || resp.GetCount() != 1 || resp.GetSkipped() != 1 {
		t.Errorf("response = %v, want 2 matched (the duplicate once), 1 redriven, 1 skipped", resp)
	}
	if n := count(h.history("b"), evRedriven); n != 1 {
		t.Errorf("b redriven %d times, want once", n)
	}
	r := h.audit()[0]
	if r.GetCount() != 1 || !r.GetDone() || r.GetFilter() != nil {
		t.Errorf("audit record = %v, want count 1, done, no filter (a list was given)", r)
	}
}

// TestBulkRedriveCutShortKeepsItsCount: a caller that goes away stops the
// release; the record says how far it got and is not done.
func TestBulkRedriveCutShortKeepsItsCount(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.deadLetter("a", "X")
	h.deadLetter("b", "X")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.e.RedriveDeadLetters(ctx, alice, &durablev1.RedriveDeadLettersRequest{Rate: 1})
		done <- err
	}()
	// The first letter goes at once; the second would wait a second of the
	// fake clock, which never moves.
	deadline := time.Now().Add(10 * time.Second)
	for len(h.audit()) == 0 || h.audit()[0].GetCount() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first letter was not released")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	r := h.audit()[0]
	if r.GetMatched() != 2 || r.GetCount() != 1 || r.GetDone() {
		t.Errorf("audit record = %v, want 1 of 2, not done", r)
	}
	if dl, _ := h.e.ListDeadLetters(context.Background(), &durablev1.ListDeadLettersRequest{}); len(dl.GetDeadLetters()) != 1 {
		t.Errorf("%d letters left, want 1", len(dl.GetDeadLetters()))
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
