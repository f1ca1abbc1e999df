package tui

import (
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// overrideConsole is a live console on the detail pane of the fixture's
// ChargeCard activity, and the fake behind it.
func overrideConsole(t *testing.T) (Model, *fakeBackend) {
	t.Helper()
	fake := fixtureBackend()
	m := setup(t, fake, Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	m = feed(next.(Model), snapshot(fixtureActivities(), fixtureWorkflows())...)
	m, _ = pressAll(m, "j", "j", "j", "j", "enter")
	if m.screen != screenDetail || m.detailActivity().GetActivityType() != "ChargeCard" {
		t.Fatalf("not on the ChargeCard detail: screen %v, %v", m.screen, m.detailActivity().GetActivityType())
	}
	return m, fake
}

// pressAll sends keys to m and returns the command of the last one.
func pressAll(m Model, ks ...string) (Model, tea.Cmd) {
	var cmd tea.Cmd
	for _, k := range keys(ks...) {
		var next tea.Model
		next, cmd = m.Update(k)
		m = next.(Model)
	}
	return m, cmd
}

func TestPThenWordsThenYSendsExactlyThatOverride(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		keys   []string
		target client.PolicyTarget
		reason string
	}{
		{name: "ForTheTypeOnEveryQueue", keys: []string{"p", "max-attempts=8 initial=30s start-to-close=2m", "enter", "y"},
			target: client.PolicyTarget{ActivityType: "ChargeCard"}},
		{name: "TabNarrowsItToTheActivitysQueue", keys: []string{"p", "tab", "max-attempts=8 initial=30s start-to-close=2m", "enter", "y"},
			target: client.PolicyTarget{ActivityType: "ChargeCard", TaskQueue: "default"}},
		{name: "WithAReason", keys: []string{"p", "max-attempts=8 initial=30s start-to-close=2m", "enter", "e", "INC-7 gateway slow", "enter"},
			target: client.PolicyTarget{ActivityType: "ChargeCard"}, reason: "INC-7 gateway slow"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m, fake := overrideConsole(t)
			m, cmd := pressAll(m, c.keys...)
			if m.confirm != nil || cmd == nil {
				t.Fatalf("the dialog did not go ahead: confirm=%v", m.confirm)
			}
			next, _ := m.Update(cmd())
			m = next.(Model)
			want := &durablev1.OptionsPatch{MaxAttempts: proto.Int32(8), InitialMs: proto.Int64(30000), StartToCloseTimeout: durationpb.New(2 * time.Minute)}
			calls := fake.overrideCalls()
			if len(calls) != 1 || calls[0].target != c.target || !proto.Equal(calls[0].patch, want) || calls[0].reason != c.reason {
				t.Fatalf("SetPolicyOverride calls = %+v, want one of %v %v %q", calls, c.target, want, c.reason)
			}
			if got := m.flash.text; !strings.Contains(got, "set: initial 1s → 30s, max attempts 5 → 8, start-to-close 30s → 2m") || m.flash.warn {
				t.Errorf("flash = %q", got)
			}
		})
	}
}

func TestOverrideWordsThatDoNotReadNameTheBadWordAndSendNothing(t *testing.T) {
	t.Parallel()
	m, fake := overrideConsole(t)
	m, _ = pressAll(m, "p", "max-attempts=8 retries=3", "enter")
	if m.confirm == nil || !strings.Contains(m.View(), `"retries=3": unknown option`) {
		t.Fatalf("the dialog does not name the bad word:\n%s", m.View())
	}
	m, _ = pressAll(m, "y") // typed into the words, not a yes
	if m.confirm == nil || !m.confirm.override.typing() {
		t.Fatal("y answered the dialog while the words do not read")
	}
	m, _ = pressAll(m, "esc")
	if m.confirm != nil || len(fake.overrideCalls()) != 0 || m.flash.text != "no override set for ChargeCard" {
		t.Fatalf("after esc: confirm=%v calls=%v flash=%q", m.confirm, fake.overrideCalls(), m.flash.text)
	}
}

func TestOverrideIsRefusedOfflineAndWhileWritesAreRefused(t *testing.T) {
	t.Parallel()
	t.Run("DaemonRefusesWrites", func(t *testing.T) {
		t.Parallel()
		m, fake := overrideConsole(t)
		m = feed(m, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
			Writes: &durablev1.WritesState{Refused: true, Reason: "disk full", Since: timestamppb.New(t0)}})
		m, _ = pressAll(m, "p")
		if m.confirm != nil || !m.flash.refused {
			t.Fatalf("p opened the dialog while writes are refused: confirm=%v flash=%+v", m.confirm, m.flash)
		}
		if len(fake.overrideCalls()) != 0 {
			t.Fatal("an override was sent")
		}
	})
	t.Run("OfflineAfterTheDialogOpened", func(t *testing.T) {
		t.Parallel()
		m, fake := overrideConsole(t)
		m, _ = pressAll(m, "p", "max-attempts=8", "enter")
		next, _ := m.Update(streamErrMsg{gen: m.conn.gen, err: errors.New("daemon went away")})
		m = next.(Model)
		m, cmd := pressAll(m, "y")
		if m.confirm == nil || !m.flash.refused || cmd != nil {
			t.Fatalf("y went ahead offline: confirm=%v flash=%+v", m.confirm, m.flash)
		}
		if len(fake.overrideCalls()) != 0 {
			t.Fatal("an override was sent")
		}
	})
}

func TestOverrideTheDaemonRefusesIsFlashedAsAFailure(t *testing.T) {
	t.Parallel()
	m, fake := overrideConsole(t)
	fake.overrideErr = errors.New(`principal "dash" (role reader) may not call SetPolicyOverride`)
	m, cmd := pressAll(m, "p", "max-attempts=8", "enter", "y")
	next, _ := m.Update(cmd())
	m = next.(Model)
	if !m.flash.warn || !strings.Contains(m.flash.text, "override of ChargeCard not set") || !strings.Contains(m.flash.text, "may not call") {
		t.Fatalf("flash = %+v", m.flash)
	}
}
