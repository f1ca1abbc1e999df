package tui

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestFingerprintGroupSelectsExactlyItsLetters: g twice groups the letters
// by fingerprint, so that two outages of one failure type are two lines;
// enter on one shows exactly its letters under fp:…, and R sends those and
// nothing else, as wf dlq redrive --fingerprint would.
func TestFingerprintGroupSelectsExactlyItsLetters(t *testing.T) {
	t.Parallel()
	var letters []*durablev1.PendingActivity
	var refused []ref
	for i, msg := range []string{
		"dial tcp 10.0.0.7:5432: connect: connection refused",
		"certificate has expired",
		"dial tcp 10.0.0.9:5432: connect: connection refused",
		"dial tcp 10.0.0.8:5432: connect: connection refused",
	} {
		a := act(fmt.Sprintf("order-%d", i), "1", "ChargeCard", stDead, 5, 5)
		a.DeadLetteredTime = at(-time.Duration(10-i) * time.Minute)
		a.LastFailure = fail("Unavailable", msg)
		letters = append(letters, a)
		if strings.Contains(msg, "refused") {
			refused = append(refused, refOf(a))
		}
	}
	slices.Reverse(refused) // newest first, as the view shows them
	fp := activity.Fingerprint(letters[0].GetLastFailure())

	m := setup(t, &fakeBackend{}, Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	m = feed(next.(Model), snapshot(letters, nil)...)
	m = pressKeys(m, "2", "g")
	if n := len(m.st.dead.groupOrder); n != 1 {
		t.Fatalf("by failure type: %d groups, want 1", n)
	}
	m = press(m, "g")
	v := ansi.Strip(m.View())
	if n := len(m.st.dead.groupOrder); n != 2 || !strings.Contains(v, "grouped by fingerprint") ||
		!strings.Contains(v, fp) || !strings.Contains(v, "dial tcp <ip>:<n>: connect: connection refused") {
		t.Fatalf("by fingerprint: %d groups, want 2 (largest first, the message as the fingerprint reads it):\n%s", n, v)
	}
	m = press(m, "enter")
	if got := m.filterCanonical(); got != "fp:"+fp || m.listLen() != 3 {
		t.Fatalf("the group opened as %q with %d letters, want fp:%s and 3", got, m.listLen(), fp)
	}
	m = press(m, "R")
	if m.confirm == nil || !slices.Equal(m.confirm.refs, refused) {
		t.Fatalf("R asks for %v, want exactly the refused connections %v", m.confirm, refused)
	}
	if v := ansi.Strip(m.View()); !strings.Contains(v, "Redrive 3 dead letters?") || !strings.Contains(v, "filter fp:"+fp) {
		t.Fatalf("the dialog does not name the count and the fingerprint:\n%s", v)
	}
	// g goes round to no grouping, and back to the failure type.
	m = pressKeys(m, "esc", "esc", "g")
	if !m.views.dead.grouped || m.st.dead.byPrint {
		t.Fatalf("after the round, grouped %v by fingerprint %v; want by failure type", m.views.dead.grouped, m.st.dead.byPrint)
	}
}

func pressKeys(m Model, ks ...string) Model {
	for _, k := range ks {
		m = press(m, k)
	}
	return m
}
