package tui

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"google.golang.org/protobuf/types/known/timestamppb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// receive runs the stream's receive command as the console does, on the
// clock arrival, and applies what it gives.
func receive(t *testing.T, m Model, arrival time.Time, evs ...*durablev1.WatchEvent) Model {
	t.Helper()
	s := &watchStream{WatchStream: &fakeStream{ctx: context.Background(), events: evs}, cancel: func() {}}
	for range evs {
		msg := recvCmd(s, m.conn.gen, func() time.Time { return arrival })()
		next, _ := m.Update(msg)
		m = next.(Model)
	}
	return m
}

// rowOf is the line of the attempts view that shows workflow wf.
func rowOf(t *testing.T, m Model, wf string) string {
	t.Helper()
	for _, l := range strings.Split(ansi.Strip(m.View()), "\n") {
		if strings.Contains(l, wf) {
			return l
		}
	}
	t.Fatalf("no row for %s in:\n%s", wf, ansi.Strip(m.View()))
	return ""
}

func retryingAt(wf string, due time.Time) *durablev1.PendingActivity {
	a := act(wf, "1", "ChargeCard", stRetrying, 2, 5)
	a.NextAttemptTime = timestamppb.New(due)
	return a
}

func upsert(acts ...*durablev1.PendingActivity) *durablev1.WatchEvent {
	return &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, Activities: acts}
}

// TestCountdownFromEventTime: a retry due 0.4 s after it was scheduled
// arrives 0.9 s after the last tick; drawn at once it says 0.4s, not the
// 1.3s the tick's clock would give.
func TestCountdownFromEventTime(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	m = receive(t, m, t0, snapshot(fixtureActivities(), fixtureWorkflows())...)
	next, _ := m.Update(tickMsg{now: t0})
	m = next.(Model)

	arrival := t0.Add(900 * time.Millisecond)
	ev := upsert(retryingAt("order-3000", arrival.Add(400*time.Millisecond)))
	ev.ServerTime = timestamppb.New(arrival)
	m = receive(t, m, arrival, ev)
	if row := rowOf(t, m, "order-3000"); !strings.Contains(row, " 0.4s ") {
		t.Fatalf("a backoff of 0.4s that just arrived shows as:\n%s", row)
	}
	// A tick that was read before the event but handled after it does not
	// take the clock back.
	next, _ = m.Update(tickMsg{now: t0.Add(500 * time.Millisecond)})
	if row := rowOf(t, next.(Model), "order-3000"); !strings.Contains(row, " 0.4s ") {
		t.Fatalf("after a late tick:\n%s", row)
	}
}

// TestCountdownFollowsTheDaemonsClock: the console's clock is 5 s behind
// the daemon's; the stream's server_time shows it, and a countdown counts
// to the daemon's moment, not to the console's.
func TestCountdownFollowsTheDaemonsClock(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	skew := 5 * time.Second
	evs := snapshot(fixtureActivities(), fixtureWorkflows())
	for _, ev := range evs {
		ev.ServerTime = timestamppb.New(t0.Add(skew))
	}
	m = receive(t, m, t0, evs...)
	ev := upsert(retryingAt("order-3000", t0.Add(skew+2*time.Second)))
	// Sent 30 ms before it arrived: delivery never makes the clocks look
	// further apart than they are.
	ev.ServerTime = timestamppb.New(t0.Add(skew + 970*time.Millisecond))
	m = receive(t, m, t0.Add(time.Second), ev)
	if row := rowOf(t, m, "order-3000"); !strings.Contains(row, " 1.0s ") {
		t.Fatalf("due 2s after the daemon's t0, drawn 1s later, shows as:\n%s", row)
	}
}

// offline returns a console that had the fixture (with its operations) and
// lost the stream at t0+1s; the reconnection is due 8 s later.
func offline(t *testing.T) Model {
	t.Helper()
	m := setup(t, fixtureBackend(), Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	evs := snapshot(fixtureActivities(), fixtureWorkflows())
	evs[0].Operations = fixtureOperations()
	m = receive(t, next.(Model), t0, evs...)
	next, _ = m.Update(streamErrMsg{gen: m.conn.gen, err: errors.New("daemon went away"), at: t0.Add(time.Second)})
	return next.(Model)
}

// TestOfflineRowsStandStillAsOfTheBreak: offline, the header says when the
// rows were last true and the countdowns and ages stay as they were then,
// however long the reconnection takes.
func TestOfflineRowsStandStillAsOfTheBreak(t *testing.T) {
	t.Parallel()
	m := offline(t)
	before := rowOf(t, m, "order-1001 ")
	next, _ := m.Update(tickMsg{now: t0.Add(time.Minute)})
	m = next.(Model)
	v := ansi.Strip(m.View())
	if !strings.Contains(strings.Split(v, "\n")[0], "○ offline · as of 03:00:01 UTC") {
		t.Fatalf("header:\n%s", v)
	}
	if after := rowOf(t, m, "order-1001 "); after != before || !strings.Contains(after, "3.2s") {
		t.Fatalf("offline a minute, the row went from\n%s\nto\n%s", before, after)
	}
	// Back: the rows are the new snapshot's, on the daemon's clock again.
	next, _ = m.Update(reconnectMsg{gen: m.conn.gen})
	m = next.(Model)
	m = receive(t, m, t0.Add(time.Minute), snapshot(fixtureActivities(), fixtureWorkflows())...)
	if v := ansi.Strip(m.View()); strings.Contains(v, "as of") || !strings.Contains(rowOf(t, m, "order-1001 "), "overdue 55s") {
		t.Fatalf("live again:\n%s", v)
	}
}

// TestOfflineActionsSayWhy: offline, r, R and x do nothing but say why and
// how to get out of it; the help bar offers them no longer and offers
// ctrl+r; a dialog opened before the break does not go ahead.
func TestOfflineActionsSayWhy(t *testing.T) {
	t.Parallel()
	m := offline(t)
	for _, k := range []string{"2", "r", "R", "x", "5", "x"} {
		if m = press(m, k); k == "2" || k == "5" {
			continue
		}
		if m.confirm != nil {
			t.Fatalf("%s opened a dialog offline", k)
		}
		v := ansi.Strip(m.View())
		lines := strings.Split(v, "\n")
		if !strings.Contains(lines[1], "offline: reconnecting in 8s — ctrl+r to reconnect now") {
			t.Fatalf("after %s, the status line says:\n%s", k, lines[1])
		}
		help := lines[len(lines)-1]
		if strings.Contains(help, "redrive") || !strings.HasPrefix(help, "ctrl+r reconnect •") {
			t.Fatalf("offline help bar: %s", help)
		}
	}
	// The answer counts down with the reconnection.
	next, _ := m.Update(tickMsg{now: t0.Add(6 * time.Second)})
	if l := strings.Split(ansi.Strip(next.(Model).View()), "\n")[1]; !strings.Contains(l, "reconnecting in 3s") {
		t.Fatalf("5s later: %s", l)
	}

	// A dialog open when the stream broke stays open, and y does nothing.
	m = setup(t, fixtureBackend(), Params{})
	m = receive(t, m, t0, snapshot(fixtureActivities(), fixtureWorkflows())...)
	m = press(press(m, "2"), "r")
	if m.confirm == nil {
		t.Fatal("r opened no dialog while live")
	}
	next, _ = m.Update(streamErrMsg{gen: m.conn.gen, err: errors.New("daemon went away"), at: t0})
	m = next.(Model)
	next, cmd := m.Update(keys("y")[0])
	m = next.(Model)
	if m.confirm == nil || cmd != nil || m.job != nil {
		t.Fatalf("y offline: dialog=%v cmd=%v job=%v", m.confirm != nil, cmd != nil, m.job != nil)
	}
	if l := strings.Split(ansi.Strip(m.View()), "\n")[1]; !strings.HasPrefix(l, "offline: reconnecting in") {
		t.Fatalf("y offline: status %q", l)
	}
}

// TestRefusedWritesDisableActions: while the daemon refuses writes, r says
// so with the daemon's reason, and the help bar leaves it out.
func TestRefusedWritesDisableActions(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	m = receive(t, m, t0, snapshot(fixtureActivities(), fixtureWorkflows())...)
	m = receive(t, m, t0, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		Writes: &durablev1.WritesState{Refused: true, Reason: "not enough disk space", Since: timestamppb.New(t0)}})
	m = press(press(m, "2"), "r")
	lines := strings.Split(ansi.Strip(m.View()), "\n")
	if m.confirm != nil || !strings.Contains(lines[1], "the daemon refuses writes: not enough disk space") {
		t.Fatalf("r with writes refused: dialog=%v\n%s", m.confirm != nil, strings.Join(lines, "\n"))
	}
	if help := lines[len(lines)-1]; strings.Contains(help, "redrive") {
		t.Fatalf("help bar with writes refused: %s", help)
	}
	// Writes back: the answer goes, and r asks again.
	m = receive(t, m, t0, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		Writes: &durablev1.WritesState{Since: timestamppb.New(t0)}})
	if v := ansi.Strip(m.View()); strings.Contains(v, "refuses writes") {
		t.Fatalf("writes are back:\n%s", v)
	}
	if m = press(m, "r"); m.confirm == nil {
		t.Fatal("r opened no dialog once writes were back")
	}
}

// TestReconnectNowSkipsTheBackoff: ctrl+r connects at once; the scheduled
// reconnection, when it comes, is ignored.
func TestReconnectNowSkipsTheBackoff(t *testing.T) {
	t.Parallel()
	m := offline(t)
	scheduled := m.conn.gen
	next, cmd := m.Update(tea.KeyMsg{Type: tea.KeyCtrlR})
	m = next.(Model)
	if cmd == nil || !m.conn.retrying || m.conn.gen == scheduled {
		t.Fatalf("ctrl+r: cmd=%v retrying=%v gen %d→%d", cmd != nil, m.conn.retrying, scheduled, m.conn.gen)
	}
	opened, ok := cmd().(streamOpenedMsg)
	if !ok || opened.gen != m.conn.gen {
		t.Fatalf("ctrl+r gave %T, want a stream of generation %d", opened, m.conn.gen)
	}
	if next, cmd := m.Update(reconnectMsg{gen: scheduled}); cmd != nil || next.(Model).conn.gen != m.conn.gen {
		t.Fatal("the scheduled reconnection ran after ctrl+r")
	}
	if l := strings.Split(ansi.Strip(m.View()), "\n")[1]; !strings.Contains(l, "reconnecting…") {
		t.Fatalf("status after ctrl+r: %q", l)
	}
}

// TestFlashesExpire: an outcome goes after 8 s, a failure after 30 s, and a
// key clears either.
func TestFlashesExpire(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	m = receive(t, m, t0, snapshot(fixtureActivities(), fixtureWorkflows())...)
	tick := func(m Model, d time.Duration) Model {
		next, _ := m.Update(tickMsg{now: t0.Add(d)})
		return next.(Model)
	}
	m = m.say("op-7 completed")
	if m = tick(m, 7900*time.Millisecond); m.flash.text == "" {
		t.Fatal("an outcome went before 8s")
	}
	if m = tick(m, 8*time.Second); m.flash.text != "" {
		t.Fatal("an outcome stayed 8s")
	}
	m = m.warn("redrive failed")
	if m = tick(m, 37*time.Second); m.flash.text == "" {
		t.Fatal("a failure went before 30s")
	}
	if m = tick(m, 38*time.Second); m.flash.text != "" {
		t.Fatal("a failure stayed 30s")
	}
	m = m.warn("redrive failed")
	if m = press(m, "j"); m.flash.text != "" {
		t.Fatal("a key left the failure on screen")
	}
}
