package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

const (
	opRunning   = durablev1.OperationState_OPERATION_STATE_RUNNING
	opCompleted = durablev1.OperationState_OPERATION_STATE_COMPLETED
	opCancelled = durablev1.OperationState_OPERATION_STATE_CANCELLED
)

// deadLetters dead-letters one activity in each of n workflows named
// prefix-0 … prefix-(n-1), a clock tick apart so that they leave the
// dead-letter queue in that order.
func (h *harness) deadLetters(prefix string, n int, failureType string) []string {
	h.t.Helper()
	var wfs []string
	for i := range n {
		wf := fmt.Sprintf("%s-%03d", prefix, i)
		h.deadLetter(wf, failureType)
		h.clock.Advance(time.Millisecond)
		wfs = append(wfs, wf)
	}
	return wfs
}

// startOp starts a redrive operation as alice and checks it answered at once
// with a running one.
func (h *harness) startOp(req *durablev1.RedriveDeadLettersRequest) *durablev1.Operation {
	h.t.Helper()
	resp, err := h.e.RedriveDeadLetters(context.Background(), alice, req)
	if err != nil {
		h.t.Fatal(err)
	}
	op := resp.GetOperation()
	if op.GetId() == "" || resp.GetMatched() != op.GetMatched() || resp.GetAuditId() != op.GetAuditId() || op.GetAuditId() == 0 {
		h.t.Fatalf("start answered %v", resp)
	}
	return op
}

func (h *harness) op(id string) *durablev1.Operation {
	h.t.Helper()
	op, err := h.e.DescribeOperation(context.Background(), &durablev1.DescribeOperationRequest{Id: id})
	if err != nil {
		h.t.Fatal(err)
	}
	return op
}

// waitOp waits (on the wall clock, the fake one stands still) until the
// operation satisfies cond, and returns it.
func (h *harness) waitOp(id, what string, cond func(*durablev1.Operation) bool) *durablev1.Operation {
	h.t.Helper()
	return h.waitOpStepping(id, what, cond, 0)
}

// waitOpAdvancing is waitOp that moves the fake clock on a second after
// each 100 ms (wall clock) in which cond did not come true.
func (h *harness) waitOpAdvancing(id, what string, cond func(*durablev1.Operation) bool) *durablev1.Operation {
	h.t.Helper()
	return h.waitOpStepping(id, what, cond, time.Second)
}

// waitOpStepping is waitOp that, with step above zero, moves the fake clock
// on by step after each 100 ms in which cond did not come true.
func (h *harness) waitOpStepping(id, what string, cond func(*durablev1.Operation) bool, step time.Duration) *durablev1.Operation {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	next := time.Now().Add(100 * time.Millisecond)
	for {
		op := h.op(id)
		if cond(op) {
			return op
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: %s never happened; last %v", id, what, op)
		}
		if step > 0 && time.Now().After(next) {
			h.clock.Advance(step)
			next = time.Now().Add(100 * time.Millisecond)
		}
		time.Sleep(time.Millisecond)
	}
}

func released(n int64) func(*durablev1.Operation) bool {
	return func(op *durablev1.Operation) bool { return op.GetReleased()+op.GetSkipped() >= n }
}

func finished(op *durablev1.Operation) bool { return op.GetState() != opRunning }

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

func (h *harness) dlq() []*durablev1.PendingActivity {
	h.t.Helper()
	r, err := h.e.ListDeadLetters(context.Background(), &durablev1.ListDeadLettersRequest{PageSize: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	return r.GetDeadLetters()
}

// redriven returns the ActivityRedriven events of a workflow.
func (h *harness) redriven(wf string) []*durablev1.HistoryEvent {
	h.t.Helper()
	var out []*durablev1.HistoryEvent
	for _, e := range h.history(wf) {
		if e.GetType() == evRedriven {
			out = append(out, e)
		}
	}
	return out
}

// TestRedriveOperationReleasesAtItsRate: the call answers at once with a
// running operation; the first letter goes at once and then one every
// 1/rate seconds of the engine's clock, oldest first, each with an
// ActivityRedriven event naming the operation; progress, the audit record
// and the dead-letter queue agree at every step.
func TestRedriveOperationReleasesAtItsRate(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	wfs := h.deadLetters("rate", 25, "Unavailable")
	h.deadLetter("other", "BadInput")
	start := h.clock.Now()
	op := h.startOp(&durablev1.RedriveDeadLettersRequest{
		Filter: &durablev1.DeadLetterFilter{FailureType: "Unavailable"}, Rate: 10, Reason: "outage over",
	})
	if op.GetState() != opRunning || op.GetMatched() != 25 || op.GetLeft() != 25 || op.GetRate() != 10 || op.GetKind() != "redrive" ||
		op.GetPrincipal() != "alice" || op.GetRole() != "operator" || op.GetReason() != "outage over" ||
		op.GetFilter().GetFailureType() != "Unavailable" || op.GetListed() || !op.GetStartedTime().AsTime().Equal(start) {
		t.Fatalf("started %v", op)
	}
	for _, step := range []struct {
		advance time.Duration
		want    int64
	}{{0, 1}, {time.Second, 11}, {time.Second, 21}, {time.Second, 25}} {
		h.clock.Advance(step.advance)
		got := h.waitOp(op.GetId(), fmt.Sprintf("%d released", step.want), released(step.want))
		if got.GetReleased() != step.want || got.GetLeft() != 25-step.want {
			t.Fatalf("at +%v: %d released, %d left; want %d released", h.clock.Now().Sub(start), got.GetReleased(), got.GetLeft(), step.want)
		}
		if n := len(h.dlq()); n != int(26-step.want) {
			t.Fatalf("at +%v: %d letters in the DLQ, want %d", h.clock.Now().Sub(start), n, 26-step.want)
		}
	}
	done := h.op(op.GetId())
	if done.GetState() != opCompleted || !done.GetFinishedTime().AsTime().Equal(start.Add(3*time.Second)) || done.GetSkipped() != 0 {
		t.Errorf("finished %v", done)
	}
	for i, wf := range wfs {
		evs := h.redriven(wf)
		if len(evs) != 1 {
			t.Fatalf("%s redriven %d times", wf, len(evs))
		}
		ev := evs[0]
		if due := start.Add(time.Duration(i) * 100 * time.Millisecond); ev.GetTime().AsTime().Before(due) {
			t.Errorf("letter %d released at +%v, before its due +%v", i, ev.GetTime().AsTime().Sub(start), due.Sub(start))
		}
		if ev.GetOperationId() != op.GetId() || ev.GetPrincipal() != "alice" || ev.GetReason() != "outage over" || ev.GetEdit() != nil {
			t.Errorf("%s: ActivityRedriven = %v", wf, ev)
		}
		if a := h.describe(wf).GetPendingActivities()[0]; a.GetRedrivenByOperation() != op.GetId() || a.GetState() != durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED {
			t.Errorf("%s after release: %v", wf, a)
		}
	}
	if dl := h.dlq(); len(dl) != 1 || dl[0].GetWorkflowId() != "other" {
		t.Errorf("left in the DLQ: %v, want only the letter the filter did not match", dl)
	}
	recs := h.audit()
	if len(recs) != 1 {
		t.Fatalf("audit log = %v, want one record for the operation", recs)
	}
	r := recs[0]
	if r.GetId() != op.GetAuditId() || r.GetRpc() != "RedriveDeadLetters" || r.GetOperationId() != op.GetId() || r.GetFilter().GetFailureType() != "Unavailable" ||
		r.GetMatched() != 25 || r.GetCount() != 25 || !r.GetDone() || len(r.GetActivities()) != 25 || r.GetReason() != "outage over" {
		t.Errorf("audit record = %v", r)
	}
}

// TestRedriveOperationResumesOnANewEngine: an engine closed half way
// through an operation leaves it running in the store; a new engine on the
// same store goes on from the cursor, paced from its own start (not
// releasing what it missed while down as one herd), and every letter goes
// back exactly once.
func TestRedriveOperationResumesOnANewEngine(t *testing.T) {
	t.Parallel()
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := engine.NewFakeClock(t0)
	open := func() *harness {
		e, err := engine.New(st, engine.Options{Clock: clock, Jitter: func(d time.Duration) time.Duration { return d }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return &harness{t: t, e: e, clock: clock}
	}
	h := open()
	wfs := h.deadLetters("resume", 30, "X")
	op := h.startOp(&durablev1.RedriveDeadLettersRequest{Rate: 10, Reason: "INC-3"})
	h.clock.Advance(time.Second)
	h.waitOp(op.GetId(), "11 released", released(11))
	if err := h.e.Close(); err != nil {
		t.Fatal(err)
	}

	clock.Advance(time.Hour) // the daemon was down for an hour
	h = open()
	got := h.waitOp(op.GetId(), "one more at the restart", released(12))
	if got.GetReleased() != 12 || got.GetState() != opRunning {
		t.Fatalf("after the restart: %v, want 12 released and still running (not the rest at once)", got)
	}
	// The releaser may still be between the release that committed and
	// its sleep on the fake clock when the test sees the release: a
	// second's advance made then would wake nothing, so the waits below
	// move the clock on again while nothing comes.
	h.clock.Advance(time.Second)
	h.waitOpAdvancing(op.GetId(), "22 released", released(22))
	h.clock.Advance(time.Second)
	got = h.waitOpAdvancing(op.GetId(), "completed", finished)
	if got.GetState() != opCompleted || got.GetReleased() != 30 || got.GetLeft() != 0 {
		t.Fatalf("finished %v", got)
	}
	for _, wf := range wfs {
		if n := len(h.redriven(wf)); n != 1 {
			t.Errorf("%s redriven %d times, want once", wf, n)
		}
	}
	if r := h.audit()[0]; r.GetCount() != 30 || !r.GetDone() {
		t.Errorf("audit record = %v, want 30 and done", r)
	}
}

// TestCancelOperationStopsReleases: a cancel ends the operation in one
// transaction with an audit record of its own; what it released stays
// released, the rest stays in the DLQ however long the clock runs on, and
// a second cancel is refused.
func TestCancelOperationStopsReleases(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.deadLetters("cancel", 20, "X")
	h.deadLetter("barrier", "Y")
	op := h.startOp(&durablev1.RedriveDeadLettersRequest{Filter: &durablev1.DeadLetterFilter{FailureType: "X"}, Rate: 10})
	h.clock.Advance(time.Second)
	h.waitOp(op.GetId(), "11 released", released(11))
	bob := engine.Actor{Principal: "bob", Role: "operator"}
	ctx := context.Background()
	got, err := h.e.CancelOperation(ctx, bob, &durablev1.CancelOperationRequest{Id: op.GetId(), Reason: "INC-4 worse"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetState() != opCancelled || got.GetReleased() != 11 || got.GetLeft() != 9 || got.GetCancelledBy() != "bob" ||
		got.GetCancelReason() != "INC-4 worse" || !got.GetFinishedTime().AsTime().Equal(h.clock.Now()) {
		t.Fatalf("cancel answered %v", got)
	}
	// Long past the operation's end, and through another operation that
	// the releaser completes, so it has certainly looked again.
	h.clock.Advance(time.Minute)
	barrier := h.startOp(&durablev1.RedriveDeadLettersRequest{Filter: &durablev1.DeadLetterFilter{FailureType: "Y"}})
	h.waitOp(barrier.GetId(), "completed", finished)
	if after := h.op(op.GetId()); !proto.Equal(after, got) {
		t.Errorf("after the cancel: %v, want it as the cancel left it: %v", after, got)
	}
	if n := len(h.dlq()); n != 9 {
		t.Errorf("%d letters in the DLQ, want the 9 the cancel kept", n)
	}
	if _, err := h.e.CancelOperation(ctx, bob, &durablev1.CancelOperationRequest{Id: op.GetId()}); !errors.Is(err, engine.ErrOperationFinished) {
		t.Errorf("second cancel: %v, want ErrOperationFinished", err)
	}
	if _, err := h.e.CancelOperation(ctx, bob, &durablev1.CancelOperationRequest{Id: barrier.GetId()}); !errors.Is(err, engine.ErrOperationFinished) {
		t.Errorf("cancel of a completed operation: %v, want ErrOperationFinished", err)
	}
	recs := h.audit() // newest first: the barrier, the cancel, the start
	if len(recs) != 3 {
		t.Fatalf("audit log = %v", recs)
	}
	cancelled, started := recs[1], recs[2]
	if cancelled.GetRpc() != "CancelOperation" || cancelled.GetPrincipal() != "bob" || cancelled.GetReason() != "INC-4 worse" ||
		cancelled.GetOperationId() != op.GetId() || cancelled.GetCount() != 9 || cancelled.GetMatched() != 20 || !cancelled.GetDone() {
		t.Errorf("cancel record = %v", cancelled)
	}
	if started.GetId() != op.GetAuditId() || started.GetCount() != 11 || !started.GetDone() {
		t.Errorf("start record = %v, want 11 and done", started)
	}
}

// TestRedriveOperationSkipsWhatIsNoLongerDead: a list selects the listed
// letters that are dead when it starts, each once; one redriven by hand
// before its turn is skipped, not redriven twice.
func TestRedriveOperationSkipsWhatIsNoLongerDead(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.deadLetter("a", "X")
	h.deadLetter("b", "X")
	h.startWithActivity("alive", nil)
	ref := func(wf string) *durablev1.ActivityRef { return &durablev1.ActivityRef{WorkflowId: wf, ActivityId: "1"} }
	op := h.startOp(&durablev1.RedriveDeadLettersRequest{
		Activities: []*durablev1.ActivityRef{ref("a"), ref("a"), ref("alive"), ref("nobody"), ref("b")}, Rate: 1,
	})
	if op.GetMatched() != 2 || !op.GetListed() || op.GetFilter() != nil {
		t.Fatalf("started %v, want 2 matched (a once, b), listed", op)
	}
	h.waitOp(op.GetId(), "a released", released(1))
	if _, err := h.e.RedriveDeadLetter(context.Background(), alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: "b", ActivityId: "1"}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Second)
	got := h.waitOp(op.GetId(), "completed", finished)
	if got.GetState() != opCompleted || got.GetReleased() != 1 || got.GetSkipped() != 1 || got.GetLeft() != 0 {
		t.Errorf("finished %v, want 1 released and 1 skipped", got)
	}
	if evs := h.redriven("b"); len(evs) != 1 || evs[0].GetOperationId() != "" {
		t.Errorf("b: %v, want the one redrive by hand", evs)
	}
}

// TestRedriveOperationCountsReDeadLetters: a letter the operation released
// that dead-letters again is counted on the operation and stays in the DLQ;
// once redriven by hand it no longer belongs to the operation.
func TestRedriveOperationCountsReDeadLetters(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.deadLetter("again", "X")
	op := h.startOp(&durablev1.RedriveDeadLettersRequest{})
	h.waitOp(op.GetId(), "completed", finished)
	// The operation reads as completed once its release commits; the task
	// it queued is handed out once the release's sync is done.
	h.fail(h.awaitActivity(), &durablev1.Failure{Type: "X", Message: "still down"})
	if got := h.op(op.GetId()); got.GetReDeadLettered() != 1 {
		t.Fatalf("after the letter failed again: %v, want re_dead_lettered 1", got)
	}
	dl := h.dlq()
	if len(dl) != 1 || dl[0].GetRedrivenByOperation() != op.GetId() {
		t.Fatalf("DLQ = %v, want the letter, released by %s", dl, op.GetId())
	}
	if _, err := h.e.RedriveDeadLetter(context.Background(), alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: "again", ActivityId: "1"}); err != nil {
		t.Fatal(err)
	}
	h.fail(h.pollActivity(), &durablev1.Failure{Type: "X", Message: "still down"})
	if got := h.op(op.GetId()); got.GetReDeadLettered() != 1 {
		t.Errorf("after a redrive by hand and another failure: re_dead_lettered %d, want still 1", got.GetReDeadLettered())
	}
}

// TestRedriveOperationDryRunStartsNothing: a dry run says how many letters
// match and shows the first 100, oldest first, and writes nothing.
func TestRedriveOperationDryRunStartsNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	wfs := h.deadLetters("dry", 101, "X")
	h.deadLetter("other", "Y")
	resp, err := h.e.RedriveDeadLetters(context.Background(), alice, &durablev1.RedriveDeadLettersRequest{
		Filter: &durablev1.DeadLetterFilter{FailureType: "X"}, DryRun: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetMatched() != 101 || len(resp.GetPreview()) != 100 || resp.GetOperation() != nil || resp.GetAuditId() != 0 {
		t.Fatalf("dry run: matched %d, %d previewed, operation %v, audit %d", resp.GetMatched(), len(resp.GetPreview()), resp.GetOperation(), resp.GetAuditId())
	}
	for i, a := range resp.GetPreview() {
		if a.GetWorkflowId() != wfs[i] {
			t.Fatalf("preview[%d] = %s, want %s (oldest first)", i, a.GetWorkflowId(), wfs[i])
		}
	}
	ops, err := h.e.ListOperations(context.Background(), &durablev1.ListOperationsRequest{})
	if err != nil || len(ops.GetOperations()) != 0 {
		t.Errorf("operations after a dry run: %v, %v", ops.GetOperations(), err)
	}
	if len(h.audit()) != 0 || len(h.dlq()) != 102 {
		t.Errorf("a dry run wrote something: %d audit records, %d letters", len(h.audit()), len(h.dlq()))
	}
}

// TestRedriveOperationFiltersByTimeAndFingerprint: the dead-lettered
// window and the fingerprint narrow the selection like the other fields.
func TestRedriveOperationFiltersByTimeAndFingerprint(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	wfs := h.deadLetters("window", 5, "X")
	var times []time.Time
	for _, wf := range wfs {
		times = append(times, h.describe(wf).GetPendingActivities()[0].GetDeadLetteredTime().AsTime())
	}
	dry := func(f *durablev1.DeadLetterFilter) int64 {
		t.Helper()
		resp, err := h.e.RedriveDeadLetters(context.Background(), alice, &durablev1.RedriveDeadLettersRequest{Filter: f, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetMatched()
	}
	if n := dry(&durablev1.DeadLetterFilter{DeadLetteredAfter: ts(times[1]), DeadLetteredBefore: ts(times[4])}); n != 3 {
		t.Errorf("after letter 1 (inclusive), before letter 4: %d, want 3", n)
	}
	if n := dry(&durablev1.DeadLetterFilter{DeadLetteredBefore: ts(times[0])}); n != 0 {
		t.Errorf("before the first: %d, want 0", n)
	}
	// Every letter failed with X: down, so its fingerprint selects them
	// all, and that of another failure none.
	if n := dry(&durablev1.DeadLetterFilter{FailureFingerprint: activity.Fingerprint(&durablev1.Failure{Type: "X", Message: "down"})}); n != 5 {
		t.Errorf("by the letters' fingerprint: %d, want 5", n)
	}
	if n := dry(&durablev1.DeadLetterFilter{FailureFingerprint: activity.Fingerprint(&durablev1.Failure{Type: "X", Message: "up"})}); n != 0 {
		t.Errorf("by a fingerprint no letter has: %d, want 0", n)
	}
}

// TestRedriveWithEditChangesOptions: an edit goes onto the activity's own
// options as it goes back, what follows from them (max attempts, the
// budget, a default lease) is derived again, and the edit is in history and
// the audit log, for a single redrive and an operation alike.
func TestRedriveWithEditChangesOptions(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{DLQAfterAttempts: 7})
	h.deadLetter("single", "X")
	h.deadLetter("bulk", "Y")
	ctx := context.Background()
	maxAttempts, zero := int32(3), int32(0)
	edit := &durablev1.OptionsPatch{MaxAttempts: &maxAttempts, StartToCloseTimeout: dur(5 * time.Second), ScheduleToCloseTimeout: dur(time.Minute),
		NonRetryable: &durablev1.StringList{Values: []string{"BadInput"}}}
	resp, err := h.e.RedriveDeadLetter(ctx, alice, &durablev1.RedriveDeadLetterRequest{WorkflowId: "single", ActivityId: "1", Reason: "longer", Edit: edit})
	if err != nil {
		t.Fatal(err)
	}
	a := resp.GetActivity()
	if a.GetMaxAttempts() != 3 || a.GetOptions().GetRetryPolicy().GetMaxAttempts() != 3 || a.GetOptions().GetStartToCloseTimeout().AsDuration() != 5*time.Second ||
		!a.GetExpirationTime().AsTime().Equal(h.clock.Now().Add(time.Minute)) || a.GetOptions().GetRetryPolicy().GetNonRetryable()[0] != "BadInput" {
		t.Errorf("edited activity = %v", a)
	}
	if evs := h.redriven("single"); len(evs) != 1 || !proto.Equal(evs[0].GetEdit(), edit) {
		t.Errorf("ActivityRedriven = %v, want the edit", evs)
	}
	if r := h.audit()[0]; !proto.Equal(r.GetEdit(), edit) {
		t.Errorf("audit record = %v, want the edit", r)
	}

	// Zero values mean the defaults again: the daemon's max attempts, and a
	// lease of the schedule-to-close budget.
	reset := &durablev1.OptionsPatch{MaxAttempts: &zero, StartToCloseTimeout: dur(0), ScheduleToCloseTimeout: dur(30 * time.Second)}
	op := h.startOp(&durablev1.RedriveDeadLettersRequest{Filter: &durablev1.DeadLetterFilter{FailureType: "Y"}, Edit: reset})
	if !proto.Equal(op.GetEdit(), reset) {
		t.Errorf("operation edit = %v", op.GetEdit())
	}
	h.waitOp(op.GetId(), "completed", finished)
	b := h.describe("bulk").GetPendingActivities()[0]
	if b.GetMaxAttempts() != 7 || b.GetOptions().GetStartToCloseTimeout().AsDuration() != 30*time.Second {
		t.Errorf("bulk after the edit: max attempts %d, start-to-close %v; want 7 and 30s", b.GetMaxAttempts(), b.GetOptions().GetStartToCloseTimeout().AsDuration())
	}
	if evs := h.redriven("bulk"); len(evs) != 1 || !proto.Equal(evs[0].GetEdit(), reset) || evs[0].GetOperationId() != op.GetId() {
		t.Errorf("bulk ActivityRedriven = %v", evs)
	}
	if r := h.audit()[0]; r.GetOperationId() != op.GetId() || !proto.Equal(r.GetEdit(), reset) {
		t.Errorf("operation's audit record = %v", r)
	}
}

// TestListOperationsNewestFirstAndPaged: operations list newest first in
// pages; unknown and malformed ids are ErrNotFound.
func TestListOperationsNewestFirstAndPaged(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	var ids []string
	for range 3 {
		op := h.startOp(&durablev1.RedriveDeadLettersRequest{}) // nothing to redrive: completed at once
		if op.GetState() != opCompleted || op.GetMatched() != 0 || op.GetFinishedTime() == nil {
			t.Fatalf("an operation that matched nothing: %v", op)
		}
		ids = append(ids, op.GetId())
	}
	ctx := context.Background()
	p1, err := h.e.ListOperations(ctx, &durablev1.ListOperationsRequest{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := h.e.ListOperations(ctx, &durablev1.ListOperationsRequest{PageSize: 2, NextPageToken: p1.GetNextPageToken()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range append(p1.GetOperations(), p2.GetOperations()...) {
		got = append(got, op.GetId())
	}
	if fmt.Sprint(got) != fmt.Sprint([]string{ids[2], ids[1], ids[0]}) || len(p2.GetNextPageToken()) != 0 {
		t.Errorf("pages = %v (next %q), want %v newest first", got, p2.GetNextPageToken(), ids)
	}
	if _, err := h.e.ListOperations(ctx, &durablev1.ListOperationsRequest{NextPageToken: []byte("junk")}); !errors.As(err, new(*engine.InvalidError)) {
		t.Errorf("foreign page token: %v, want InvalidError", err)
	}
	for _, id := range []string{"op-999", "op-0", "nonsense", ""} {
		if _, err := h.e.DescribeOperation(ctx, &durablev1.DescribeOperationRequest{Id: id}); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("describe %q: %v, want ErrNotFound", id, err)
		}
		if _, err := h.e.CancelOperation(ctx, alice, &durablev1.CancelOperationRequest{Id: id}); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("cancel %q: %v, want ErrNotFound", id, err)
		}
	}
}

// TestWatchCarriesOperations: the snapshot has running operations, and
// their progress arrives as UPSERTs until they finish.
func TestWatchCarriesOperations(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.deadLetters("watch", 2, "X")
	op := h.startOp(&durablev1.RedriveDeadLettersRequest{Rate: 1})
	h.waitOp(op.GetId(), "first released", released(1))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan *durablev1.WatchEvent, 1000)
	go h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
		events <- ev
		return nil
	})
	next := func(want func(*durablev1.WatchEvent) bool) *durablev1.WatchEvent {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case ev := <-events:
				if want(ev) {
					return ev
				}
			case <-timeout:
				t.Fatal("no such event")
			}
		}
	}
	snap := next(func(ev *durablev1.WatchEvent) bool { return len(ev.GetOperations()) > 0 })
	if snap.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT || snap.GetOperations()[0].GetId() != op.GetId() || snap.GetOperations()[0].GetReleased() != 1 {
		t.Fatalf("snapshot = %v", snap)
	}
	next(func(ev *durablev1.WatchEvent) bool {
		return ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE
	})
	h.clock.Advance(time.Second)
	up := next(func(ev *durablev1.WatchEvent) bool { return len(ev.GetOperations()) > 0 })
	if got := up.GetOperations()[0]; up.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT || got.GetState() != opCompleted || got.GetReleased() != 2 {
		t.Errorf("upsert = %v", up)
	}
}

// TestUnstartedOperationIsDeletedAtStart: an operation whose work list was
// being written when the daemon died was never acknowledged; a new engine
// deletes it, work list and all, and numbers the next one after it.
func TestUnstartedOperationIsDeletedAtStart(t *testing.T) {
	t.Parallel()
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.Update(func(tx engine.Tx) error {
		if err := tx.PutOperationItems(7, 0, []*durablev1.ActivityRef{{WorkflowId: "a", ActivityId: "1"}, {WorkflowId: "b", ActivityId: "1"}}); err != nil {
			return err
		}
		return tx.PutOperation(&durablev1.OperationRecord{Seq: 7, Operation: &durablev1.Operation{Id: "op-7", Matched: 2}})
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := engine.NewFakeClock(t0)
	e, err := engine.New(st, engine.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	h := &harness{t: t, e: e, clock: clock}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var gone bool
		err := st.View(func(tx engine.Tx) error {
			_, err := tx.GetOperation(7)
			gone = errors.Is(err, engine.ErrNotFound)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the unstarted operation was not deleted")
		}
		time.Sleep(time.Millisecond)
	}
	err = st.View(func(tx engine.Tx) error {
		items, err := tx.OperationItems(7, 0, 10)
		if len(items) != 0 {
			t.Errorf("its work list is still there: %v", items)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.DescribeOperation(context.Background(), &durablev1.DescribeOperationRequest{Id: "op-7"}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("describe op-7: %v, want ErrNotFound", err)
	}
	if op := h.startOp(&durablev1.RedriveDeadLettersRequest{}); op.GetId() != "op-8" {
		t.Errorf("the next operation is %s, want op-8", op.GetId())
	}
}
