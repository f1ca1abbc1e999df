package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// TestDetailSaysALeaseExpiredAndForHowLong: past its lease deadline a
// running activity's state reads "lease expired 4.0s ago", not a lease that
// "ends in overdue 4.0s".
func TestDetailSaysALeaseExpiredAndForHowLong(t *testing.T) {
	t.Parallel()
	a := act("order-5000", "1", "ChargeCard", stStarted, 2, 5)
	a.LeaseDeadline = at(-4 * time.Second)
	m := feed(setup(t, fixtureBackend(), Params{}), snapshot(nil, nil)...)
	m = feed(m, upsert(a))
	m = press(m, "enter")
	if m.screen != screenDetail {
		t.Fatalf("enter opened screen %d, want the detail", m.screen)
	}
	v := ansi.Strip(m.View())
	if !strings.Contains(v, "running · attempt 2 of 5 · lease expired 4.0s ago") || strings.Contains(v, "ends in overdue") {
		t.Fatalf("detail state line:\n%s", v)
	}
}
