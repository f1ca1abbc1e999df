package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestETAUsesTheMeasuredPace: a redrive set to 50/s that has dealt with
// 101 letters in 10 s goes at 10/s; its 200 left take 20 s, not the 4 s
// the rate it was given promises. Until it has run two seconds the rate
// set is all there is, and the line says so.
func TestETAUsesTheMeasuredPace(t *testing.T) {
	t.Parallel()
	op := &durablev1.Operation{Id: "op-9", Kind: "redrive", State: opRunning, Rate: 50,
		Matched: 301, Released: 95, Skipped: 6, ReDeadLettered: 4, Left: 200, StartedTime: at(-10 * time.Second)}
	cases := []struct {
		name     string
		started  time.Duration
		wantLeft time.Duration
		wantPace string
	}{
		{name: "Measured", started: -10 * time.Second, wantLeft: 20 * time.Second, wantPace: "10.0/s"},
		{name: "TooSoonToMeasure", started: -time.Second, wantLeft: 4 * time.Second, wantPace: "50/s set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			op := &durablev1.Operation{Id: op.Id, Kind: op.Kind, State: op.State, Rate: op.Rate, Matched: op.Matched,
				Released: op.Released, Skipped: op.Skipped, ReDeadLettered: op.ReDeadLettered, Left: op.Left, StartedTime: at(c.started)}
			if got := opTimeLeft(op, t0); got != c.wantLeft {
				t.Fatalf("time left %v, want %v", got, c.wantLeft)
			}
			if got := paceText(op, t0); got != c.wantPace {
				t.Fatalf("pace %q, want %q", got, c.wantPace)
			}
			m := setup(t, fixtureBackend(), Params{})
			next, _ := m.Update(tea.WindowSizeMsg{Width: 200, Height: 43})
			m = feed(next.(Model), snapshot(fixtureActivities(), fixtureWorkflows())...)
			m.follow = []string{"op-9"}
			m = feed(m, upsertOps(op))
			want := "released 95 of 301 · re-dead-lettered 4 · 204 still in the DLQ · 6 skipped · " + c.wantPace + " · ~" + span(c.wantLeft) + " left"
			if s := statusLine(m); !strings.Contains(s, want) {
				t.Fatalf("status %q, want %q", s, want)
			}
		})
	}
}
