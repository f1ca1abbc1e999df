package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"google.golang.org/protobuf/types/known/durationpb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// fixtureStats are two types: ChargeCard's start-to-close of 2s is under
// 2×P99 (3.6s), SendEmail's 30s leaves room.
func fixtureStats() []*durablev1.ActivityTypeStats {
	d := durationpb.New
	return []*durablev1.ActivityTypeStats{
		{ActivityType: "ChargeCard", Attempts: 1204, Failures: 31, P50: d(420 * time.Millisecond), P95: d(1200 * time.Millisecond),
			P99: d(1800 * time.Millisecond), Max: d(2 * time.Second),
			OptionsInForce: &durablev1.ActivityOptions{StartToCloseTimeout: d(2 * time.Second),
				RetryPolicy: &durablev1.RetryPolicy{InitialMs: 500, Backoff: 2, MaxIntervalMs: 2000, MaxAttempts: 5}}},
		{ActivityType: "SendEmail", Attempts: 310, P50: d(80 * time.Millisecond), P95: d(300 * time.Millisecond),
			P99: d(900 * time.Millisecond), Max: d(1100 * time.Millisecond),
			OptionsInForce: &durablev1.ActivityOptions{StartToCloseTimeout: d(30 * time.Second),
				RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000, Backoff: 2, MaxIntervalMs: 10000, MaxAttempts: 8}}},
	}
}

func statsBackend() *fakeBackend {
	f := fixtureBackend()
	f.stats = fixtureStats()
	return f
}

func TestStatsWarnsWhenStartToCloseIsUnderTwiceP99(t *testing.T) {
	t.Parallel()
	cases := []struct {
		typ      string
		warn     bool
		contains string
	}{
		{"ChargeCard", true, "2s is below 2×P99 (3.6s)"},
		{"SendEmail", false, "ok · start-to-close ≈ 2×P99 = 1.8s, initial ≈ P95 = 300ms"},
	}
	for i, c := range cases {
		s := fixtureStats()[i]
		text, _, warn := statsAdvice(s)
		if s.GetActivityType() != c.typ || warn != c.warn || !strings.Contains(text, c.contains) {
			t.Errorf("%s: advice = %q warn=%v, want %q warn=%v", s.GetActivityType(), text, warn, c.contains, c.warn)
		}
	}
}

func TestStatsAreReadOnEnteringAndRefreshedOnlyWhileShown(t *testing.T) {
	t.Parallel()
	f := statsBackend()
	m := setup(t, f, Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	m = feed(next.(Model), snapshot(fixtureActivities(), fixtureWorkflows())...)
	m, cmd := m.show(screenStats)
	if cmd == nil || m.screen != screenStats || !m.views.stats.loading {
		t.Fatalf("entering the stats view reads nothing (screen %v)", m.screen)
	}
	gen := m.views.stats.gen
	m = m.gotStats(statsMsg{gen: gen, rows: fixtureStats()})
	if v := ansi.Strip(m.View()); !strings.Contains(v, "ChargeCard") || !strings.Contains(v, "below 2×P99") {
		t.Fatalf("stats view lacks ChargeCard's warning:\n%s", v)
	}
	if _, cmd := m.statsTicked(statsTickMsg{gen: gen}); cmd == nil {
		t.Fatal("a tick while the view is shown does not read the stats again")
	}
	if _, cmd := m.statsTicked(statsTickMsg{gen: gen - 1}); cmd != nil {
		t.Fatal("a tick of an earlier visit reads the stats")
	}
	m = press(m, "1")
	if _, cmd := m.statsTicked(statsTickMsg{gen: gen}); cmd != nil {
		t.Fatal("a tick after leaving the view reads the stats")
	}
	// An answer of an earlier visit does not overwrite a later one.
	m, _ = m.show(screenStats)
	m = m.gotStats(statsMsg{gen: gen, rows: nil})
	if m.views.stats.gen == gen || m.views.stats.rows == nil {
		t.Fatal("an answer of an earlier visit replaced the numbers")
	}
}
