package tui

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"
)

// setup returns a console on a fixed clock, in plain ASCII, fed by fake.
func setup(t testing.TB, fake *fakeBackend, p Params) Model {
	t.Helper()
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.Ascii)
	p.Backend = fake
	p.Addr = "127.0.0.1:7345"
	p.ClockFunc = func() time.Time { return t0 }
	p.Renderer = r
	if p.Clipboard == nil {
		p.Clipboard = io.Discard // not the terminal running the tests
	}
	if p.ReconnectDelayFunc == nil {
		p.ReconnectDelayFunc = func(int) time.Duration { return 8 * time.Second }
	}
	return New(p)
}

func fixtureBackend() *fakeBackend {
	return &fakeBackend{
		scripts: []script{{events: snapshot(fixtureActivities(), fixtureWorkflows())}},
		history: fixtureHistory(),
		audit:   fixtureAudit(),
	}
}

func keys(s ...string) []tea.Msg {
	var out []tea.Msg
	for _, k := range s {
		switch k {
		case "enter":
			out = append(out, tea.KeyMsg{Type: tea.KeyEnter})
		case "esc":
			out = append(out, tea.KeyMsg{Type: tea.KeyEsc})
		case "tab":
			out = append(out, tea.KeyMsg{Type: tea.KeyTab})
		default:
			out = append(out, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)})
		}
	}
	return out
}

func waitFor(t *testing.T, tm *teatest.TestModel, text string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(text)) },
		teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}

// disconnected is base's daemon going away after its snapshot; the
// reconnection hangs, so the console stays offline.
func disconnected(base func() *fakeBackend) func() *fakeBackend {
	return func() *fakeBackend {
		f := base()
		first := f.scripts[0]
		first.end = errors.New("daemon went away")
		f.scripts = []script{first, {}}
		return f
	}
}

// TestGoldenViews renders every screen at two terminal sizes on a fixed clock
// and fixed data. Refresh with: go test ./tui -run TestGoldenViews -update
func TestGoldenViews(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		backend func() *fakeBackend
		keys    []string
		waitFor string // shown once the keys' commands have answered
		// more keys are sent once waitFor is on screen, then waitMore.
		more     []string
		waitMore string
	}{
		{name: "Attempts", backend: fixtureBackend},
		{name: "DeadLetters", backend: fixtureBackend, keys: []string{"2"}},
		{name: "DeadLettersGrouped", backend: fixtureBackend, keys: []string{"2", "g"}},
		{name: "DeadLettersByFingerprint", backend: fixtureBackend, keys: []string{"2", "g", "g"}},
		{name: "Workflows", backend: fixtureBackend, keys: []string{"3"}},
		{name: "Timeline", backend: fixtureBackend, keys: []string{"3", "j", "enter"}, waitFor: "TimerStarted"},
		{name: "Detail", backend: fixtureBackend, keys: []string{"j", "j", "j", "j", "enter"}, waitFor: "events in history"},
		{name: "Confirm", backend: fixtureBackend, keys: []string{"2", "g", "R"}},
		{name: "ConfirmBesideARunningOperation", backend: opsBackend, keys: []string{"2", "g", "R"}, waitFor: "already running"},
		{name: "ConfirmReason", backend: fixtureBackend, keys: []string{"2", "g", "R", "e", "INC-7 gateway is back"}, waitFor: "INC-7"},
		{name: "Filter", backend: fixtureBackend, keys: []string{"/", "c", "h", "a", "r", "g", "e"}},
		{name: "FilterError", backend: fixtureBackend, keys: []string{"/", "type:GatewayTimeout attempt>="}, waitFor: "attempt>=N"},
		{name: "ConfirmFreeText", backend: fixtureBackend, keys: []string{"2", "/", "order-099", "enter", "R"}, waitFor: "by substring"},
		{name: "Help", backend: fixtureBackend, keys: []string{"?"}},
		{name: "HelpDeadLetters", backend: fixtureBackend, keys: []string{"2", "?"}},
		{name: "Audit", backend: fixtureBackend, keys: []string{"4"}, waitFor: "INC-7"},
		{name: "AuditRecord", backend: fixtureBackend, keys: []string{"4"}, waitFor: "INC-7",
			more: []string{"j", "enter"}, waitMore: "audit record #41"},
		{name: "AuditRecordOverride", backend: fixtureBackend, keys: []string{"4"}, waitFor: "INC-7",
			more: []string{"j", "j", "enter"}, waitMore: "audit record #40"},
		{name: "Operations", backend: opsBackend, keys: []string{"5"}},
		{name: "Operation", backend: opsBackend, keys: []string{"5", "enter"}, waitFor: "audit record"},
		{name: "CancelDialog", backend: opsBackend, keys: []string{"5", "x"}, waitFor: "Cancel op-6?"},
		{name: "CancelDialogReason", backend: opsBackend, keys: []string{"5", "x", "e", "INC-7 the fix did not hold"}, waitFor: "did not hold"},
		{name: "RedriveRunning", backend: fixtureBackend, keys: []string{"2", "R", "y"}, waitFor: "op-7 redriving"},
		// Overdue rows first, saying for how long; ids cut in the middle.
		{name: "Overdue", backend: outageBackend, waitFor: "overdue 3m05s"},
		{name: "OverdueDeadLettersHidden", backend: outageBackend, keys: []string{"D"}, waitFor: "dead letters hidden"},
		{name: "OverdueByNextDue", backend: outageBackend, keys: []string{"s", "s"}, waitFor: "sorted by next due"},
		{name: "OverdueDeadLetters", backend: outageBackend, keys: []string{"2"}, waitFor: "DEAD FOR"},
		// A queue with work and no poller first; its workflow task as a
		// home row among the overdue ones.
		{name: "Queues", backend: queuesBackend, keys: []string{"6"}, waitFor: "orders-eu"},
		{name: "Queue", backend: queuesBackend, keys: []string{"6", "enter"}, waitFor: "STALLED WORKFLOW TASKS"},
		{name: "QueueOfBusyWorkers", backend: queuesBackend, keys: []string{"6", "j", "enter"}, waitFor: "PARKED"},
		{name: "StalledWorkflowTask", backend: queuesBackend, waitFor: "stalled"},
		{name: "StalledWorkflowTaskSelected", backend: queuesBackend, keys: []string{"j"}, waitFor: "enter: its queue"},
		{name: "StalledWorkflowTaskQueue", backend: queuesBackend, keys: []string{"j"}, waitFor: "enter: its queue",
			more: []string{"enter"}, waitMore: "STALLED WORKFLOW TASKS"},
		{name: "Disconnected", backend: disconnected(fixtureBackend), waitFor: "disconnected"},
		{name: "OperationInProgress", backend: opsBackend, waitFor: "~36s left"},
		{name: "OfflineRedrive", backend: disconnected(fixtureBackend), waitFor: "disconnected",
			more: []string{"2", "R"}, waitMore: "ctrl+r to reconnect now"},
		{name: "OfflineOperations", backend: disconnected(opsBackend), waitFor: "disconnected",
			more: []string{"5", "x"}, waitMore: "ctrl+r to reconnect now"},
		{name: "OfflineHelp", backend: disconnected(opsBackend), waitFor: "disconnected",
			more: []string{"2", "?"}, waitMore: "ctrl+r reconnect"},
		// w: from a row, a letter or the detail pane to the workflow's timeline.
		{name: "TimelineFromHome", backend: fixtureBackend, keys: []string{"j", "j", "j", "j", "w"}, waitFor: "TimerStarted"},
		{name: "TimelineFromLetter", backend: fixtureBackend, keys: []string{"2", "w"}, waitFor: "workflow not found"},
		{name: "TimelineFromDetail", backend: fixtureBackend, keys: []string{"j", "j", "j", "j", "enter"}, waitFor: "events in history",
			more: []string{"w"}, waitMore: "TimerStarted"},
		{name: "HelpTimeline", backend: fixtureBackend, keys: []string{"3", "j", "enter"}, waitFor: "TimerStarted",
			more: []string{"?"}, waitMore: "copy id"},
		// ChargeCard's start-to-close is under 2×P99: its advice is a warning.
		{name: "Stats", backend: statsBackend, keys: []string{"7"}, waitFor: "rule of thumb"},
		{name: "Copied", backend: fixtureBackend, keys: []string{"2", "j", "y"}, waitFor: "copied order-0991/1"},
		// p on the detail pane: option words, then what changes and the reason.
		{name: "OverrideWords", backend: fixtureBackend, keys: []string{"j", "j", "j", "j", "enter"}, waitFor: "events in history",
			more: []string{"p", "max-attempts=8 initial=30s"}, waitMore: "initial=30s"},
		{name: "OverrideBadWord", backend: fixtureBackend, keys: []string{"j", "j", "j", "j", "enter"}, waitFor: "events in history",
			more: []string{"p", "max-attempts=8 retries=3", "enter"}, waitMore: "unknown option"},
		{name: "OverrideConfirm", backend: fixtureBackend, keys: []string{"j", "j", "j", "j", "enter"}, waitFor: "events in history",
			more: []string{"p", "max-attempts=8 initial=30s start-to-close=2m", "enter"}, waitMore: "replaces any override"},
	}
	sizes := []struct {
		name string
		w, h int
	}{{"80x24", 80, 24}, {"132x43", 132, 43}}
	for _, c := range cases {
		for _, sz := range sizes {
			t.Run(c.name+"/"+sz.name, func(t *testing.T) {
				t.Parallel()
				tm := teatest.NewTestModel(t, setup(t, c.backend(), Params{}), teatest.WithInitialTermSize(sz.w, sz.h))
				// Output is consumed as it is read: wait for the first screen
				// only when keys will produce another.
				if len(c.keys) > 0 || c.waitFor == "" {
					waitFor(t, tm, "live")
				}
				for _, k := range keys(c.keys...) {
					tm.Send(k)
				}
				if c.waitFor != "" {
					waitFor(t, tm, c.waitFor)
				}
				for _, k := range keys(c.more...) {
					tm.Send(k)
				}
				if c.waitMore != "" {
					waitFor(t, tm, c.waitMore)
				}
				if err := tm.Quit(); err != nil {
					t.Fatal(err)
				}
				final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
				golden.RequireEqual(t, []byte(ansi.Strip(final.View())+"\n"))
			})
		}
	}
}
