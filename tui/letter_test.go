package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"google.golang.org/protobuf/proto"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestSingleRedriveSaysWhatCameOfIt: after the daemon accepts the redrive
// of one letter, the status line follows the letter on the stream (running
// again, failed again, dead-lettered again) rather than repeating that the
// call was answered.
func TestSingleRedriveSaysWhatCameOfIt(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 200, Height: 43})
	m = feed(next.(Model), snapshot(fixtureActivities(), fixtureWorkflows())...)
	m = press(press(m, "2"), "r") // order-0995/2, newest first
	next, _ = m.Update(keys("y")[0])
	m = next.(Model)
	next, _ = m.Update(redriveDoneMsg{job: m.job.id})
	m = next.(Model)
	if s := statusLine(m); s != "released order-0995/2 from the DLQ · waiting for its next attempt" {
		t.Fatalf("after the answer: %q", s)
	}
	letter := proto.Clone(m.st.acts[activityKey("order-0995", "2")]).(*durablev1.PendingActivity)
	step := func(state durablev1.ActivityState, attempt, redrives int32, want string) {
		t.Helper()
		a := proto.Clone(letter).(*durablev1.PendingActivity)
		a.State, a.Attempt, a.Redrives = state, attempt, redrives
		a.LastFailure = fail("SMTPRejected", "mailbox still full")
		m = feed(m, upsert(a))
		if s := statusLine(m); !strings.HasPrefix(s, want) {
			t.Fatalf("status %q, want %q", s, want)
		}
	}
	step(stScheduled, 6, 1, "released order-0995/2 from the DLQ")
	step(stStarted, 6, 1, "order-0995/2 running again (attempt 6)")
	step(stRetrying, 7, 1, "order-0995/2 failed again (attempt 7), retrying: SMTPRejected: mailbox still full")
	step(stDead, 10, 1, "order-0995/2 dead-lettered again: SMTPRejected: mailbox still full")
	if m.letter != nil || !m.flash.warn {
		t.Fatalf("after dead again: following %v, warn %v", m.letter, m.flash.warn)
	}
}
