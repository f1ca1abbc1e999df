package tui

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

var (
	opRunning   = durablev1.OperationState_OPERATION_STATE_RUNNING
	opCompleted = durablev1.OperationState_OPERATION_STATE_COMPLETED
	opCancelled = durablev1.OperationState_OPERATION_STATE_CANCELLED
)

// opAt is the operation op-7 of three letters at a stage of its life.
func opAt(state durablev1.OperationState, released, reDead int64) *durablev1.Operation {
	op := &durablev1.Operation{Id: "op-7", Kind: "redrive", State: state, Principal: "ana", Listed: true,
		Rate: 1, Matched: 3, Released: released, Left: 3 - released, ReDeadLettered: reDead, StartedTime: at(0)}
	if state != opRunning {
		op.FinishedTime = at(time.Duration(released) * time.Second)
	}
	return op
}

func upsertOps(ops ...*durablev1.Operation) *durablev1.WatchEvent {
	return &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, Operations: ops}
}

func TestFresherOpOnlyMovesForward(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		old, next *durablev1.Operation
		wantNext  bool
	}{
		{"NothingHeld", nil, opAt(opRunning, 0, 0), true},
		{"MoreReleased", opAt(opRunning, 1, 0), opAt(opRunning, 2, 0), true},
		{"FewerReleasedIsStale", opAt(opRunning, 2, 0), opAt(opRunning, 1, 0), false},
		{"FinishedWinsOverRunning", opAt(opRunning, 2, 0), opAt(opCompleted, 3, 0), true},
		{"RunningAfterFinishedIsStale", opAt(opCancelled, 1, 0), opAt(opRunning, 2, 0), false},
		{"DeadAgainAfterFinishing", opAt(opCompleted, 3, 0), opAt(opCompleted, 3, 1), true},
		{"FewerDeadAgainIsStale", opAt(opCompleted, 3, 1), opAt(opCompleted, 3, 0), false},
		{"SameIsTaken", opAt(opRunning, 1, 0), opAt(opRunning, 1, 0), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := fresherOp(c.old, c.next)
			if (got == c.next) != c.wantNext {
				t.Fatalf("fresherOp(%v, %v) = %v", c.old, c.next, got)
			}
		})
	}
}

// statusLine is the line under the header.
func statusLine(m Model) string {
	return strings.TrimSpace(strings.Split(ansi.Strip(m.View()), "\n")[1])
}

// TestStartedOperationShowsPushedProgress: after R and y the status line is
// the operation's progress as the daemon pushes it, whatever order the
// answer and the pushes arrive in, then how it ended, which goes away.
func TestStartedOperationShowsPushedProgress(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	m = feed(next.(Model), snapshot(fixtureActivities(), fixtureWorkflows())...)
	m = press(m, "2")
	m = press(m, "R")
	next, cmd := m.Update(keys("y")[0])
	m = next.(Model)
	if m.job == nil || cmd == nil {
		t.Fatalf("after y: job = %+v, cmd = %v; want the call under way", m.job, cmd)
	}
	if s := statusLine(m); s != "starting a redrive of 3 dead letters…" {
		t.Fatalf("status %q while the call is under way", s)
	}
	// The stream may tell of the first release before the call answers.
	m = feed(m, upsertOps(opAt(opRunning, 1, 0)))
	next, _ = m.Update(redriveDoneMsg{job: m.job.id, op: opAt(opRunning, 0, 0)})
	m = next.(Model)
	if s := statusLine(m); !strings.HasPrefix(s, "op-7 redriving [####---------] released 1 of 3 · re-dead-lettered 0 · 2 still in the DLQ · 1/s set · ~2.0s left · x cancels") {
		t.Fatalf("status %q, want op-7 at 1 of 3 (the answer is older than the push)", s)
	}
	m = feed(m, upsertOps(opAt(opRunning, 2, 1)))
	if s := statusLine(m); !strings.Contains(s, "released 2 of 3 · re-dead-lettered 1 · 2 still in the DLQ · 1/s set · ~1.0s left") {
		t.Fatalf("status %q, want 2 of 3 and one dead again", s)
	}
	// It shows on every screen, and its cancel key is in the help bar.
	m = press(m, "3")
	if v := ansi.Strip(m.View()); !strings.Contains(v, "op-7 redriving") || !strings.Contains(v, "x cancel op-7") ||
		!strings.Contains(v, "op-7 keeps running") {
		t.Fatalf("workflows screen lacks the progress or the keys:\n%s", v)
	}
	m = feed(m, upsertOps(opAt(opCompleted, 3, 1)))
	want := "op-7 completed: released 3 of 3 · re-dead-lettered 1 · 1 still in the DLQ · took 3.0s"
	if s := statusLine(m); s != want || len(m.follow) != 0 {
		t.Fatalf("status %q, following %v; want %q and nothing followed", s, m.follow, want)
	}
	// Letters it released go on dead-lettering again after it completed:
	// the outcome, while shown, says so.
	m = feed(m, upsertOps(opAt(opCompleted, 3, 3)))
	if s, want := statusLine(m), "op-7 completed: released 3 of 3 · re-dead-lettered 3 · 3 still in the DLQ · took 3.0s"; s != want {
		t.Fatalf("status %q after two more letters dead-lettered again, want %q", s, want)
	}
	next, _ = m.Update(tickMsg{now: t0.Add(flashFor)})
	m = next.(Model)
	if s := statusLine(m); s != "" {
		t.Fatalf("status %q after %v, want the outcome gone", s, flashFor)
	}
	if op, _ := m.ops.get("op-7"); op.GetState() != opCompleted {
		t.Fatalf("op-7 = %v, want it kept as completed", op)
	}
}

// TestOperationsFromTheSnapshotAndAfter: the operations screen lists the
// snapshot's operations newest first, and a push moves one on in place.
func TestOperationsFromTheSnapshotAndAfter(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	evs := snapshot(fixtureActivities(), fixtureWorkflows())
	evs[0].Operations = fixtureOperations()
	m = feed(next.(Model), evs...)
	m = press(m, "5")
	var ids []string
	for i := 0; i < m.ops.set.Len(); i++ {
		ids = append(ids, m.ops.set.At(i).GetId())
	}
	if want := []string{"op-6", "op-5", "op-4"}; !slices.Equal(ids, want) {
		t.Fatalf("operations %v, want %v", ids, want)
	}
	// Another console's operation: the status line follows it too.
	if s := statusLine(m); !strings.HasPrefix(s, "op-6 by ana redriving") {
		t.Fatalf("status %q, want the running operation", s)
	}
	op := proto.Clone(fixtureOperations()[1]).(*durablev1.Operation)
	op.Released, op.Left = 200, 98
	m = feed(m, upsertOps(op))
	if v := ansi.Strip(m.View()); !strings.Contains(v, "200/300") || strings.Contains(v, "120/300") {
		t.Fatalf("after the push:\n%s", v)
	}
	// A reconnection's snapshot, taken before that push arrived, does not
	// take it back.
	m = feed(m, evs...)
	if got, _ := m.ops.get("op-6"); got.GetReleased() != 200 {
		t.Fatalf("op-6 released %d after the snapshot, want 200", got.GetReleased())
	}
	// The operation the status line showed says how it ended, though
	// another console started it.
	op = proto.Clone(op).(*durablev1.Operation)
	op.State, op.Released, op.Skipped, op.Left, op.FinishedTime = opCompleted, 298, 2, 0, at(35*time.Second)
	m = feed(m, upsertOps(op))
	if s, want := statusLine(m), "op-6 completed: released 298 of 300 · re-dead-lettered 1 · 1 still in the DLQ · 2 skipped · took 1m00s"; s != want {
		t.Fatalf("status %q, want %q", s, want)
	}
}

// TestHeaderKeepsTheConnectionStateOnANarrowTerminal: with hundreds of
// letters the tabs squeeze, and "● live" stays whole.
func TestHeaderKeepsTheConnectionStateOnANarrowTerminal(t *testing.T) {
	t.Parallel()
	var acts []*durablev1.PendingActivity
	for i := range 12345 {
		a := act("wf-"+strings.Repeat("x", i%3), fmt.Sprint(i), "Charge", stDead, 5, 5)
		a.DeadLetteredTime = at(-time.Minute)
		acts = append(acts, a)
	}
	for _, w := range []int{80, 60} {
		m := setup(t, fixtureBackend(), Params{})
		next, _ := m.Update(tea.WindowSizeMsg{Width: w, Height: 24})
		m = feed(next.(Model), snapshot(acts, fixtureWorkflows())...)
		header := strings.Split(ansi.Strip(m.View()), "\n")[0]
		if !strings.HasSuffix(header, "● live") || !strings.Contains(header, "[1 attempts (12,345)]") || ansi.StringWidth(header) > w {
			t.Errorf("header at %d columns: %q", w, header)
		}
	}
}

func TestCancelKeypress(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		keys []string
		// more are sent once waitFor is on screen.
		waitFor string
		more    []string
		want    []cancelCall
		flash   string
	}{
		{name: "XThenYCancelsTheSelectedOperation", keys: []string{"5", "x", "y"},
			want: []cancelCall{{"op-6", ""}}},
		{name: "XThenEReasonThenEnterCancelsWithTheReason", keys: []string{"5", "x", "e", "INC-7 the fix did not hold", "enter"},
			want: []cancelCall{{"op-6", "INC-7 the fix did not hold"}}},
		{name: "FromTheOperationInFull", keys: []string{"5", "enter", "x", "y"},
			want: []cancelCall{{"op-6", ""}}},
		{name: "FromAnotherScreenTheRunningOneInTheStatusLine", keys: []string{"2", "x", "y"},
			want: []cancelCall{{"op-6", ""}}},
		{name: "XThenNKeepsItRunning", keys: []string{"5", "x", "n"}, flash: "op-6 not cancelled: it keeps running"},
		{name: "XThenEscKeepsItRunning", keys: []string{"5", "x", "esc"}, flash: "op-6 not cancelled: it keeps running"},
		{name: "ReasonLineThenEscKeepsItRunning", keys: []string{"5", "x", "e", "oops", "esc"}, flash: "op-6 not cancelled: it keeps running"},
		{name: "AFinishedOneHasNothingToCancel", keys: []string{"5", "j", "j", "x"}, flash: "op-4 has completed: nothing to cancel"},
		{name: "NorACancelledOne", keys: []string{"5", "j", "x"}, flash: "op-5 was cancelled: nothing to cancel"},
		{name: "TheOneThisConsoleStarted", keys: []string{"2", "R", "y"}, waitFor: "op-7 redriving",
			more: []string{"x", "e", "too fast", "enter"}, want: []cancelCall{{"op-7", "too fast"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := opsBackend()
			tm := teatest.NewTestModel(t, setup(t, fake, Params{}), teatest.WithInitialTermSize(132, 43))
			waitFor(t, tm, "order-1001")
			for _, k := range keys(c.keys...) {
				tm.Send(k)
			}
			if c.waitFor != "" {
				waitFor(t, tm, c.waitFor)
			}
			for _, k := range keys(c.more...) {
				tm.Send(k)
			}
			if len(c.want) > 0 {
				waitFor(t, tm, "cancelled by ana")
			}
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
			if got := fake.cancelCalls(); !slices.Equal(got, c.want) {
				t.Fatalf("CancelOperation calls = %v, want %v", got, c.want)
			}
			if final.confirm != nil {
				t.Fatalf("the dialog is still open: %+v", final.confirm)
			}
			if c.flash != "" && final.flash.text != c.flash {
				t.Fatalf("flash %q, want %q", final.flash.text, c.flash)
			}
		})
	}
}

// TestCancelAnswers: the daemon's answer is said plainly, a refusal as a
// warning in its own words.
func TestCancelAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		err  error
		want string
		warn bool
	}{
		{name: "Cancelled",
			want: `op-6 cancelled by ana: released 120 of 300 · re-dead-lettered 0 · 180 still in the DLQ · reason "INC-7" · ran 10s`},
		{name: "AReaderMayNot", err: status.Error(codes.PermissionDenied, `principal "dash" (role reader) may not call CancelOperation`),
			want: `cancel of op-6 failed: permission denied: principal "dash" (role reader) may not call CancelOperation`, warn: true},
		{name: "AlreadyFinished", err: status.Error(codes.FailedPrecondition, "operation op-6 is completed: operation is finished"),
			want: "cancel of op-6 failed: failed precondition: operation op-6 is completed: operation is finished", warn: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := opsBackend()
			fake.cancelErr = c.err
			tm := teatest.NewTestModel(t, setup(t, fake, Params{}), teatest.WithInitialTermSize(200, 43))
			waitFor(t, tm, "order-1001")
			for _, k := range keys("5", "x", "e", "INC-7", "enter") {
				tm.Send(k)
			}
			waitFor(t, tm, c.want)
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
			if final.flash.text != c.want || final.flash.warn != c.warn || final.cancelling != "" {
				t.Fatalf("flash %+v, cancelling %q; want %q (warn %v)", final.flash, final.cancelling, c.want, c.warn)
			}
		})
	}
}

// TestQuitLeavesTheOperationRunning: q cancels nothing, and the console
// tells its caller what keeps running.
func TestQuitLeavesTheOperationRunning(t *testing.T) {
	t.Parallel()
	fake := fixtureBackend()
	tm := teatest.NewTestModel(t, setup(t, fake, Params{}), teatest.WithInitialTermSize(132, 43))
	waitFor(t, tm, "order-1001")
	for _, k := range keys("2", "R", "y") {
		tm.Send(k)
	}
	waitFor(t, tm, "op-7 keeps running")
	tm.Send(keys("q")[0])
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
	if n := len(fake.cancelCalls()); n != 0 {
		t.Fatalf("%d CancelOperation calls on quit, want none", n)
	}
	if ops := final.StillRunning(); len(ops) != 1 || ops[0].GetId() != "op-7" {
		t.Fatalf("StillRunning = %v, want op-7", ops)
	}
}

// TestHowItEndedIsReadInFullOnANarrowTerminal: at 80 columns the outcome of
// a cancelled operation takes a second line rather than losing what it left
// in the dead-letter queue.
func TestHowItEndedIsReadInFullOnANarrowTerminal(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	m = feed(m, snapshot(fixtureActivities(), fixtureWorkflows())...)
	m.follow = []string{"op-7"}
	op := opAt(opCancelled, 1, 1)
	op.Matched, op.Left, op.CancelledBy, op.CancelReason = 300, 299, "ana", "INC-7 the fix did not hold"
	m = feed(m, upsertOps(op))
	lines := strings.Split(ansi.Strip(m.View()), "\n")
	want := `op-7 cancelled by ana: released 1 of 300 · re-dead-lettered 1 · 300 still in the DLQ · reason "INC-7 the fix did not hold" · ran 1.0s`
	if got := strings.TrimSpace(lines[1]) + " " + strings.TrimSpace(lines[2]); got != want || len(lines) != 24 {
		t.Fatalf("%d lines, status:\n%s\n%s\nwant %q", len(lines), lines[1], lines[2], want)
	}
}

// TestCancelDialogFollowsTheOperation: the dialog's counts are the live
// ones, and it says so when the operation finishes while it is open.
func TestCancelDialogFollowsTheOperation(t *testing.T) {
	t.Parallel()
	m := setup(t, opsBackend(), Params{})
	evs := snapshot(fixtureActivities(), fixtureWorkflows())
	evs[0].Operations = fixtureOperations()
	m = feed(m, evs...)
	m = press(m, "5")
	m = press(m, "x")
	if v := ansi.Strip(m.View()); !strings.Contains(v, "op-6: 120 of 300 released, 2 skipped; the 178 left stay in the DLQ") {
		t.Fatalf("dialog:\n%s", v)
	}
	op := proto.Clone(fixtureOperations()[1]).(*durablev1.Operation)
	op.Released, op.Left = 150, 148
	m = feed(m, upsertOps(op))
	if v := ansi.Strip(m.View()); !strings.Contains(v, "op-6: 150 of 300 released, 2 skipped; the 148 left stay in the DLQ") {
		t.Fatalf("dialog after progress:\n%s", v)
	}
	op = proto.Clone(op).(*durablev1.Operation)
	op.State, op.Released, op.Left = opCompleted, 298, 0
	m = feed(m, upsertOps(op))
	if v := ansi.Strip(m.View()); !strings.Contains(v, "it has completed meanwhile · op-6: 298 of 300") || m.confirm == nil {
		t.Fatalf("dialog after it completed:\n%s", v)
	}
}

// TestLongOperationIDsAreShownWhole: the ids of a database several nodes
// share run to many digits, and the list keeps them whole at 80 columns,
// since an id is what wf ops takes.
func TestLongOperationIDsAreShownWhole(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	m = feed(m, snapshot(fixtureActivities(), fixtureWorkflows())...)
	op := opAt(opCompleted, 3, 0) // not running: the status line does not name it
	op.Id = "op-77003"
	m = feed(m, upsertOps(op))
	m = press(m, "5")
	view := ansi.Strip(m.View())
	if row := lineWith(view, "completed"); !strings.Contains(row, "op-77003 ") {
		t.Fatalf("the operations screen cuts op-77003 (row %q):\n%s", row, view)
	}
}

// lineWith returns the first line of s that contains sub, or "".
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
