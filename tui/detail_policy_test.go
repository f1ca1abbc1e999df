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

// TestDetailShowsThePolicyInForce: the detail view shows the options in
// force, marking the fields an override sets with who set it and why, from
// the overrides the Watch stream carries.
func TestDetailShowsThePolicyInForce(t *testing.T) {
	t.Parallel()
	a := act("order-7", "1", "ChargeCard", stRetrying, 3, 6)
	a.Options.RetryPolicy.MaxAttempts = 2
	a.OptionsInForce = &durablev1.ActivityOptions{
		StartToCloseTimeout: durationpb.New(20 * time.Second),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 1000, Backoff: 2, MaxIntervalMs: 60000, MaxAttempts: 6},
	}
	a.OverriddenFields = []string{"retry_policy.max_attempts", "start_to_close_timeout"}
	o := &durablev1.PolicyOverride{ActivityType: "ChargeCard", Principal: "ops", Reason: "INC-7: card API flapping",
		Patch: &durablev1.OptionsPatch{StartToCloseTimeout: durationpb.New(20 * time.Second)}}
	m := setup(t, fixtureBackend(), Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 200, Height: 50}) // no wrapping
	m = next.(Model)
	m = feed(m,
		&durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT, Activities: []*durablev1.PendingActivity{a}, PolicyOverrides: []*durablev1.PolicyOverride{o}},
		&durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE},
	)
	text := ansi.Strip(strings.Join(m.detailLines(a), "\n"))
	for _, want := range []string{
		`max attempts 6 (override by ops: "INC-7: card API flapping")`,
		"start-to-close 20s (override)",
		"gives up after attempt 6",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("detail lacks %q:\n%s", want, text)
		}
	}

	// Cleared: the daemon sends the override with cleared set and the
	// activity's new view.
	gone := &durablev1.PolicyOverride{ActivityType: "ChargeCard", Cleared: true}
	b := act("order-7", "1", "ChargeCard", stRetrying, 3, 2)
	b.Options.RetryPolicy.MaxAttempts = 2
	m = feed(m, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, Activities: []*durablev1.PendingActivity{b}, PolicyOverrides: []*durablev1.PolicyOverride{gone}})
	if len(m.st.overrides) != 0 {
		t.Errorf("overrides after the clear = %v", m.st.overrides)
	}
	text = ansi.Strip(strings.Join(m.detailLines(m.st.acts[keyOf(b)]), "\n"))
	if strings.Contains(text, "override") || !strings.Contains(text, "max attempts 2") {
		t.Errorf("after the clear the detail still shows an override, or not the code's 2:\n%s", text)
	}
}
