package tui

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
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
	cases := []struct {
		name   string
		keys   []string
		want   []ref
		reason string
	}{
		// The dead letters view shows the newest first: order-0995, order-0991, order-0990.
		{name: "RThenYRedrivesTheSelectedLetterOnce", keys: []string{"2", "j", "r", "y"}, want: []ref{{"order-0991", "1"}}},
		{name: "RThenETypedReasonThenEnterRedrivesWithTheReason", keys: []string{"2", "j", "r", "e", "I", "N", "C", "-", "7", "enter"},
			want: []ref{{"order-0991", "1"}}, reason: "INC-7"},
		{name: "ReasonTypedAllAtOnce", keys: []string{"2", "j", "r", "e", "INC-7 gateway back", "enter"},
			want: []ref{{"order-0991", "1"}}, reason: "INC-7 gateway back"},
		{name: "ReasonLineThenEscCancels", keys: []string{"2", "r", "e", "I", "esc"}},
		{name: "ReasonLineTakesYAsText", keys: []string{"2", "r", "e", "y", "esc"}},
		{name: "RThenNCancels", keys: []string{"2", "r", "n"}},
		{name: "RThenEscCancels", keys: []string{"2", "r", "esc"}},
		{name: "RThenOtherKeyCancels", keys: []string{"2", "r", "r"}},
		{name: "BulkOverTheFilter", keys: []string{"2", "/", "g", "a", "t", "e", "enter", "R", "y"},
			want: []ref{{"order-0991", "1"}, {"order-0990", "1"}}},
		{name: "BulkOverTheGroup", keys: []string{"2", "g", "j", "R", "y"}, want: []ref{{"order-0995", "2"}}},
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
			if len(c.want) > 0 {
				waitUntil(t, "redrives", func() bool { return len(fake.redriven()) >= len(c.want) })
			}
			if err := tm.Quit(); err != nil {
				t.Fatal(err)
			}
			final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
			got := fake.redriven()
			for _, call := range fake.singleCalls() {
				if call.reason != c.reason {
					t.Errorf("redrive of %v had reason %q, want %q", call.ref, call.reason, c.reason)
				}
			}
			// Calls run concurrently (up to maxInflight), so compare as sets.
			byID := func(a, b ref) int { return strings.Compare(a.workflowID+a.activityID, b.workflowID+b.activityID) }
			slices.SortFunc(got, byID)
			slices.SortFunc(c.want, byID)
			if !slices.Equal(got, c.want) {
				t.Fatalf("RedriveDeadLetter calls = %v, want %v", got, c.want)
			}
			if len(c.want) == 0 && (final.job != nil || final.flash != "redrive cancelled") {
				t.Fatalf("after cancel: job=%v flash=%q", final.job, final.flash)
			}
		})
	}
}

// TestBulkRedriveIsSpreadOverTime checks the token bucket: the first redrive
// goes at once, the rest wait for ticks rather than leaving as one burst.
func TestBulkRedriveIsSpreadOverTime(t *testing.T) {
	t.Parallel()
	fake := fixtureBackend()
	m := setup(t, fake, Params{})
	m = feed(m, snapshot(fixtureActivities(), fixtureWorkflows())...)
	m = press(m, "2")
	m = press(m, "R")
	if m.confirm == nil || len(m.confirm.refs) != 3 {
		t.Fatalf("confirm = %+v, want a dialog for 3 letters", m.confirm)
	}
	next, cmd := m.Update(keys("y")[0])
	m = next.(Model)
	if m.job == nil || m.job.next != 1 {
		t.Fatalf("after y: job = %+v, want one redrive released", m.job)
	}
	if cmd == nil {
		t.Fatal("after y: no command")
	}
	// A tick releases one more; nothing else does.
	next, _ = m.Update(redriveTickMsg{job: m.job.id})
	m = next.(Model)
	if m.job.next != 2 {
		t.Fatalf("after a tick: %d released, want 2", m.job.next)
	}
	line := m.job.progressLine(80, 50)
	if want := "0/3"; !contains(line, want) {
		t.Fatalf("progress %q lacks %q", line, want)
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
