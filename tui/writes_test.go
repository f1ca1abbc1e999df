package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"google.golang.org/protobuf/types/known/timestamppb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestRefusedWritesStayOnScreenUntilTheyAreBack: when the daemon says it
// refuses changes of state (a full disk), the header says the console is
// read only and the status line says since when and why, on every screen,
// until the daemon says writes are back.
func TestRefusedWritesStayOnScreenUntilTheyAreBack(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	m = feed(next.(Model), snapshot(fixtureActivities(), fixtureWorkflows())...)
	if v := m.View(); strings.Contains(v, "writes refused") || strings.Contains(v, "read only") {
		t.Fatalf("writes accepted, but the screen says otherwise:\n%s", v)
	}
	reason := "not enough disk space: 239.9 MiB free of 300 MiB on the volume of /var/lib/durable, below the disk reserve of 256 MiB"
	m = feed(m, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		Writes: &durablev1.WritesState{Refused: true, Reason: reason, Since: timestamppb.New(t0.Add(-2 * time.Minute))}})
	for _, key := range []string{"1", "2", "3", "5"} {
		next, _ := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(key)})
		m = next.(Model)
		v := m.View()
		for _, want := range []string{"● live, read only", "writes refused since " + t0.Add(-2*time.Minute).UTC().Format("15:04:05 UTC") + " (2m00s ago)", "239.9 MiB free of 300 MiB"} {
			if !strings.Contains(v, want) {
				t.Fatalf("screen %s does not say %q:\n%s", key, want, v)
			}
		}
	}
	m = feed(m, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		Writes: &durablev1.WritesState{Since: timestamppb.New(t0)}})
	if v := m.View(); strings.Contains(v, "writes refused") || strings.Contains(v, "read only") {
		t.Fatalf("writes are back, but the screen still says refused:\n%s", v)
	}
}
