package tui

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRedriveKeypress(t *testing.T) {
	t.Parallel()
	// The dead letters view shows the newest first: order-0995/2, order-0991/1, order-0990/1.
	newestFirst := []ref{{"order-0995", "2"}, {"order-0991", "1"}, {"order-0990", "1"}}
	cases := []struct {
		name   string
		keys   []string
		single []redriveCall
		bulk   []bulkCall
	}{
		{name: "RThenYRedrivesTheSelectedLetterOnceWithoutAReason", keys: []string{"2", "j", "r", "y"},
			single: []redriveCall{{ref{"order-0991", "1"}, ""}}},
		{name: "RThenETypedReasonThenEnterRedrivesWithTheReason", keys: []string{"2", "j", "r", "e", "I", "N", "C", "-", "7", "enter"},
			single: []redriveCall{{ref{"order-0991", "1"}, "INC-7"}}},
		{name: "AReasonArrivingAsOneMessageIsTypedWhole", keys: []string{"2", "j", "r", "e", "INC-7 gateway back", "enter"},
			single: []redriveCall{{ref{"order-0991", "1"}, "INC-7 gateway back"}}},
		{name: "RThenNCancels", keys: []string{"2", "r", "n"}},
		{name: "RThenEscCancels", keys: []string{"2", "r", "esc"}},
		{name: "RThenOtherKeyCancels", keys: []string{"2", "r", "r"}},
		{name: "ReasonLineThenEscCancels", keys: []string{"2", "r", "e", "I", "esc"}},
		{name: "ReasonLineTakesYAsText", keys: []string{"2", "r", "e", "y", "esc"}},
		{name: "BulkRThenYIsOneCallWithEveryLetterShown", keys: []string{"2", "R", "y"},
			bulk: []bulkCall{{refs: newestFirst, perSecond: 1000}}},
		{name: "BulkOverTheFilter", keys: []string{"2", "/", "type:GatewayTimeout", "enter", "R", "y"},
			bulk: []bulkCall{{refs: []ref{{"order-0991", "1"}, {"order-0990", "1"}}, perSecond: 1000}}},
		{name: "BulkOverTheGroup", keys: []string{"2", "g", "j", "R", "y"},
			bulk: []bulkCall{{refs: []ref{{"order-0995", "2"}}, perSecond: 1000}}},
		{name: "RedriveOnAGroupIsBulk", keys: []string{"2", "g", "r", "y"},
			bulk: []bulkCall{{refs: []ref{{"order-0991", "1"}, {"order-0990", "1"}}, perSecond: 1000}}},
		{name: "BulkWithAReason", keys: []string{"2", "R", "e", "INC-7", "enter"},
			bulk: []bulkCall{{refs: newestFirst, reason: "INC-7", perSecond: 1000}}},
		{name: "BulkThenNCancels", keys: []string{"2", "R", "n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := fixtureBackend()
			tm := teatest.NewTestModel(t, setup(t, fake, Params{RedrivesPerSecond: 1000}), teatest.WithInitialTermSize(100, 30))
			waitFor(t, tm, "order-1001")
			for _, k := range keys(c.keys...) {
				tm.Send(k)
			}
			switch {
			case len(c.bulk) > 0:
				waitFor(t, tm, "op-7 redriving")
			case len(c.single) > 0:
				waitFor(t, tm, "released order-0991/1 from the DLQ")
			}
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
			if got := fake.singleCalls(); !slices.Equal(got, c.single) {
				t.Errorf("Redrive calls = %v, want %v", got, c.single)
			}
			if got := fake.bulkCalls(); !slices.EqualFunc(got, c.bulk, func(a, b bulkCall) bool {
				return slices.Equal(a.refs, b.refs) && a.reason == b.reason && a.perSecond == b.perSecond
			}) {
				t.Errorf("RedriveList calls = %+v, want %+v", got, c.bulk)
			}
			if len(c.single)+len(c.bulk) == 0 && (final.job != nil || final.confirm != nil || final.flash.text != "redrive cancelled") {
				t.Fatalf("after cancel: job=%v confirm=%v flash=%q", final.job, final.confirm, final.flash.text)
			}
		})
	}
}

// TestRedriveErrorsAreShownPlainly covers a reader's token: the daemon says
// PermissionDenied and the console says so in words.
func TestRedriveErrorsAreShownPlainly(t *testing.T) {
	t.Parallel()
	denied := status.Error(codes.PermissionDenied, `principal "dash" (role reader) may not call RedriveDeadLetters`)
	for _, c := range []struct {
		name string
		keys []string
		want string
	}{
		{"Bulk", []string{"2", "R", "y"}, `redrive failed: permission denied: principal "dash" (role reader) may not call RedriveDeadLetters`},
		{"Single", []string{"2", "r", "y"}, `redrive of order-0995/2 failed: permission denied: principal "dash"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			fake := fixtureBackend()
			fake.redriveErr = denied
			tm := teatest.NewTestModel(t, setup(t, fake, Params{}), teatest.WithInitialTermSize(132, 30))
			waitFor(t, tm, "order-1001")
			for _, k := range keys(c.keys...) {
				tm.Send(k)
			}
			waitFor(t, tm, c.want)
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			if final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model); final.job != nil || !final.flash.warn {
				t.Fatalf("job = %v, flash = %+v; want the job over and a warning", final.job, final.flash)
			}
		})
	}
}

// feed applies watch events as if they came from the stream.
func feed(m Model, evs ...*durablev1.WatchEvent) Model {
	for _, ev := range evs {
		next, _ := m.Update(watchEventMsg{gen: m.conn.gen, ev: ev})
		m = next.(Model)
	}
	return m
}

func press(m Model, k string) Model {
	next, _ := m.Update(keys(k)[0])
	return next.(Model)
}

// TestAnErrorIsReadInFullOnANarrowTerminal: at 80 columns an error takes a
// second status line rather than losing its end, and the rows make room.
func TestAnErrorIsReadInFullOnANarrowTerminal(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	m = feed(m, snapshot(fixtureActivities(), fixtureWorkflows())...)
	m = press(m, "2")
	rows := m.bodyRows()
	m = m.warn(`redrive failed: permission denied: principal "dash" (role reader) may not call RedriveDeadLetters`)
	lines := strings.Split(ansi.Strip(m.View()), "\n")
	if len(lines) != 24 || !strings.HasPrefix(lines[1], "redrive failed: permission denied:") || !strings.Contains(lines[2], "RedriveDeadLetters") {
		t.Fatalf("%d lines, status:\n%s\n%s", len(lines), lines[1], lines[2])
	}
	if got := m.bodyRows(); got != rows-1 {
		t.Fatalf("bodyRows = %d with a two-line status, want %d", got, rows-1)
	}
}
