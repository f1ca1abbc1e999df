package tui

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// countingBackend is the fake daemon, counting History calls per workflow.
type countingBackend struct {
	*fakeBackend
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingBackend) History(ctx context.Context, workflowID string) ([]*durablev1.HistoryEvent, error) {
	c.mu.Lock()
	c.reads[workflowID]++
	c.mu.Unlock()
	c.fakeBackend.mu.Lock()
	h := c.fakeBackend.history[workflowID]
	c.fakeBackend.mu.Unlock()
	return h, nil
}

func (c *countingBackend) readsOf(wf string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[wf]
}

// setHistory gives workflow wf n events, a second apart.
func (c *countingBackend) setHistory(wf string, n int) {
	c.fakeBackend.mu.Lock()
	defer c.fakeBackend.mu.Unlock()
	var h []*durablev1.HistoryEvent
	for i := range n {
		h = append(h, &durablev1.HistoryEvent{EventId: int64(i + 1), Time: at(time.Duration(i) * time.Second),
			Type: durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED, ActivityId: "1"})
	}
	c.fakeBackend.history[wf] = h
}

// jumpConsole is a console on the fixture, synced, whose timers send their
// message at once (the test holds it), and whose stream ends at once when
// read, so every command it returns can be run here.
func jumpConsole(t *testing.T) (Model, *countingBackend) {
	t.Helper()
	fake := fixtureBackend()
	cb := &countingBackend{fakeBackend: fake, reads: map[string]int{}}
	p := Params{Backend: cb, Clipboard: io.Discard, ClockFunc: func() time.Time { return t0 }}
	m := setup(t, fake, p)
	m.p.Backend = cb
	m.after = func(_ time.Duration, msg tea.Msg) tea.Cmd { return func() tea.Msg { return msg } }
	m = feed(m, snapshot(fixtureActivities(), fixtureWorkflows())...)
	return m, cb
}

// run runs cmd and what it batches, and gives the messages that matter
// here: a stream ending (the test stream has nothing more) is left out.
func run(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	switch msg := cmd().(type) {
	case nil, streamErrMsg:
		return nil
	case tea.BatchMsg:
		var out []tea.Msg
		for _, c := range msg {
			out = append(out, run(c)...)
		}
		return out
	default:
		return []tea.Msg{msg}
	}
}

// step applies msg and gives the messages its commands answer with.
func step(t *testing.T, m Model, msg tea.Msg) (Model, []tea.Msg) {
	t.Helper()
	next, cmd := m.Update(msg)
	return next.(Model), run(cmd)
}

// settle applies msg and then every answer, except the timers' messages,
// which it gives back for the test to send when it chooses.
func settle(t *testing.T, m Model, msg tea.Msg) (Model, []timelineDueMsg) {
	t.Helper()
	var held []timelineDueMsg
	queue := []tea.Msg{msg}
	for len(queue) > 0 {
		var out []tea.Msg
		m, out = step(t, m, queue[0])
		queue = queue[1:]
		for _, o := range out {
			if d, ok := o.(timelineDueMsg); ok {
				held = append(held, d)
				continue
			}
			queue = append(queue, o)
		}
	}
	return m, held
}

func keyMsg(k string) tea.Msg { return keys(k)[0] }

// event is an event on a stream that has nothing after it, received at
// t0+d by the console's clock.
func event(m Model, d time.Duration, ev *durablev1.WatchEvent) watchEventMsg {
	return watchEventMsg{gen: m.conn.gen, ev: ev, at: t0.Add(d)}
}

func endedStream(m Model) Model {
	m.conn.stream = &watchStream{WatchStream: &fakeStream{ctx: context.Background(), end: io.EOF}, cancel: func() {}}
	return m
}

// TestOSC52SetsTheClipboardToTheIDInBase64: ESC ] 52 ; c ; base64 BEL, and
// nothing of the id reaches the terminal but its base64 form.
func TestOSC52SetsTheClipboardToTheIDInBase64(t *testing.T) {
	t.Parallel()
	if got, want := string(osc52("order-0991/1")), "\x1b]52;c;b3JkZXItMDk5MS8x\a"; got != want {
		t.Fatalf("osc52 = %q, want %q", got, want)
	}
	hostile := "evil\x1b]52;c;AAAA\a\x1b[2J\u009b/1"
	seq := osc52(hostile)
	body := seq[len("\x1b]52;c;") : len(seq)-1]
	for _, b := range body {
		if !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", rune(b)) {
			t.Fatalf("byte %q of %q is not base64", b, seq)
		}
	}
}

// TestCopyWritesTheSelectedID: y writes the sequence for the id under the
// cursor, workflow_id/activity_id for an activity or a letter, the workflow
// id on the workflows screen and the timeline, the operation id on the
// operations screen, and the flash says what was copied.
func TestCopyWritesTheSelectedID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		keys  []string
		want  string
		flash string
	}{
		{keys: []string{"2", "j"}, want: "order-0991/1"},
		{keys: []string{"1"}, want: "order-1002/1"},
		{keys: []string{"j", "j", "j", "j", "enter"}, want: "order-1001/1"},
		{keys: []string{"3"}, want: "order-1002"},
		{keys: []string{"3", "w"}, want: "order-1002"},
		{keys: []string{"5"}, want: "op-6"},
		{keys: []string{"5", "enter"}, want: "op-6"},
		{keys: []string{"2", "g"}, flash: "nothing here to copy"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.keys, ""), func(t *testing.T) {
			var buf bytes.Buffer
			backend := fixtureBackend()
			if c.keys[0] == "5" {
				backend = opsBackend()
			}
			m := setup(t, backend, Params{Clipboard: &buf})
			m = feed(m, backend.scripts[0].events...)
			for _, k := range c.keys {
				m = press(m, k)
			}
			next, cmd := m.Update(keyMsg("y"))
			m = next.(Model)
			if c.want == "" {
				if cmd != nil || m.flash.text != c.flash {
					t.Fatalf("y gave a command %v and flash %q, want none and %q", cmd != nil, m.flash.text, c.flash)
				}
				return
			}
			if cmd == nil {
				t.Fatalf("y gave no command; flash %q", m.flash.text)
			}
			if msg := cmd(); msg != nil {
				t.Fatalf("writing the sequence answered %#v", msg)
			}
			if got := buf.String(); got != string(osc52(c.want)) {
				t.Fatalf("wrote %q, want %q", got, osc52(c.want))
			}
			if want := "copied " + c.want; m.flash.text != want {
				t.Fatalf("flash %q, want %q", m.flash.text, want)
			}
		})
	}
}

// TestCopyIsTheDialogsYesOnlyInADialog: with a confirmation open, y confirms
// and writes nothing to the clipboard.
func TestCopyIsTheDialogsYesOnlyInADialog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	fake := fixtureBackend()
	m := setup(t, fake, Params{Clipboard: &buf})
	m = feed(m, snapshot(fixtureActivities(), fixtureWorkflows())...)
	m = press(press(m, "2"), "r")
	if m.confirm == nil {
		t.Fatal("r opened no dialog")
	}
	next, cmd := m.Update(keyMsg("y"))
	m = next.(Model)
	run(cmd)
	if m.confirm != nil || buf.Len() != 0 || len(fake.singleCalls()) != 1 {
		t.Fatalf("y in the dialog: dialog open %v, clipboard %q, %d redrives; want it confirmed and nothing copied",
			m.confirm != nil, buf.String(), len(fake.singleCalls()))
	}
}

// TestWOpensTheWorkflowsTimelineAndEscComesBack: from the home view, the
// dead letters, the detail pane and the workflows screen, w shows the
// history of the selection's workflow; esc returns where it was, with the
// cursor where it was.
func TestWOpensTheWorkflowsTimelineAndEscComesBack(t *testing.T) {
	t.Parallel()
	cases := []struct {
		keys   []string
		wf     string
		back   screen
		cursor int
	}{
		{keys: []string{"j", "j", "j", "j"}, wf: "order-1001", back: screenAttempts, cursor: 4},
		{keys: []string{"2", "j", "j"}, wf: "order-0990", back: screenDeadLetters, cursor: 2},
		{keys: []string{"j", "j", "j", "j", "enter"}, wf: "order-1001", back: screenDetail, cursor: 4},
		{keys: []string{"3", "j"}, wf: "order-1001", back: screenWorkflows, cursor: 1},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.keys, ""), func(t *testing.T) {
			m, cb := jumpConsole(t)
			for _, k := range c.keys {
				m = press(m, k)
			}
			before := cb.readsOf(c.wf)
			m, _ = settle(t, m, keyMsg("w"))
			if m.screen != screenTimeline || m.views.timeline.workflowID != c.wf {
				t.Fatalf("after w: screen %d showing %q, want the timeline of %s", m.screen, m.views.timeline.workflowID, c.wf)
			}
			if got := cb.readsOf(c.wf); got != before+1 {
				t.Fatalf("%d reads of %s's history, want 1", got-before, c.wf)
			}
			if v := ansi.Strip(m.View()); !strings.Contains(v, "workflow "+c.wf) {
				t.Fatalf("the timeline does not name %s:\n%s", c.wf, v)
			}
			m = press(m, "esc")
			if m.screen != c.back {
				t.Fatalf("esc went to screen %d, want %d", m.screen, c.back)
			}
			list := c.back
			if list == screenDetail {
				list = m.back
				if list != screenAttempts {
					t.Fatalf("under the detail is screen %d, want the home view", list)
				}
				if m = press(m, "esc"); m.screen != screenAttempts {
					t.Fatalf("a second esc went to screen %d, want the home view", m.screen)
				}
			}
			if got := listCursor(m, list); got != c.cursor {
				t.Fatalf("cursor at %d after coming back, want %d", got, c.cursor)
			}
		})
	}
}

// TestWOnAGroupOrTheAuditLogDoesNothing: a failure group has no single
// workflow, nor has the audit log.
func TestWOnAGroupOrTheAuditLogDoesNothing(t *testing.T) {
	t.Parallel()
	for _, ks := range [][]string{{"2", "g"}, {"4"}} {
		m, cb := jumpConsole(t)
		for _, k := range ks {
			m = press(m, k)
		}
		was := m.screen
		m, _ = settle(t, m, keyMsg("w"))
		if m.screen != was || len(cb.reads) != 0 {
			t.Fatalf("%v then w: screen %d (was %d), %d history reads", ks, m.screen, was, len(cb.reads))
		}
	}
}

// TestTimelineReadsAgainAsItsWorkflowChanges: an event about the open
// workflow reads its history again; events about others do not; a burst
// within refreshEvery costs one more read when the wait is over, however
// many events it held.
func TestTimelineReadsAgainAsItsWorkflowChanges(t *testing.T) {
	t.Parallel()
	m, cb := jumpConsole(t)
	m = endedStream(m)
	for _, k := range []string{"j", "j", "j", "j"} {
		m = press(m, k)
	}
	m, _ = settle(t, m, keyMsg("w")) // read 1, at t0
	if got := cb.readsOf("order-1001"); got != 1 {
		t.Fatalf("%d reads on opening, want 1", got)
	}

	other := upsert(retryingAt("order-0990", t0.Add(time.Minute)))
	m, held := settle(t, m, event(m, 600*time.Millisecond, other))
	if got := cb.readsOf("order-1001"); got != 1 || len(held) != 0 {
		t.Fatalf("an event about another workflow: %d reads, %d timers; want 1 and none", got, len(held))
	}

	mine := func() *durablev1.WatchEvent { return upsert(retryingAt("order-1001", t0.Add(time.Minute))) }
	// 700 ms after the first read: read at once (read 2).
	m, held = settle(t, m, event(m, 700*time.Millisecond, mine()))
	if got := cb.readsOf("order-1001"); got != 2 || len(held) != 0 {
		t.Fatalf("an event 700ms after the read: %d reads, %d timers; want 2 and none", got, len(held))
	}
	// Five more within 500 ms of it: held, one timer for them all.
	var timers []timelineDueMsg
	for i := range 5 {
		m, held = settle(t, m, event(m, time.Duration(800+50*i)*time.Millisecond, mine()))
		timers = append(timers, held...)
	}
	removed := &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE,
		Removed: []*durablev1.ActivityRef{{WorkflowId: "order-1001", ActivityId: "2"}}}
	m, held = settle(t, m, event(m, 1100*time.Millisecond, removed))
	timers = append(timers, held...)
	if got := cb.readsOf("order-1001"); got != 2 || len(timers) != 1 {
		t.Fatalf("a burst within 500ms: %d reads, %d timers; want 2 and one timer", got, len(timers))
	}
	// The wait is over: one read for the whole burst, and nothing after.
	m, held = settle(t, m, timers[0])
	if got := cb.readsOf("order-1001"); got != 3 || len(held) != 0 || m.views.timeline.waiting || m.views.timeline.stale {
		t.Fatalf("after the wait: %d reads, %d timers, waiting %v, stale %v; want 3 and nothing pending",
			got, len(held), m.views.timeline.waiting, m.views.timeline.stale)
	}
	// Gone from the timeline, nothing reads it.
	m = press(m, "esc")
	m, held = settle(t, m, event(m, 5*time.Second, mine()))
	if got := cb.readsOf("order-1001"); got != 3 || len(held) != 0 {
		t.Fatalf("after esc: %d reads, %d timers; want 3 and none", got, len(held))
	}
}

// TestTimelineReadsAgainAfterAChangeDuringARead: an event that arrives while
// a read is under way may not be in its answer, so one more read follows.
func TestTimelineReadsAgainAfterAChangeDuringARead(t *testing.T) {
	t.Parallel()
	m, cb := jumpConsole(t)
	m = endedStream(m)
	for _, k := range []string{"j", "j", "j", "j"} {
		m = press(m, k)
	}
	next, cmd := m.Update(keyMsg("w"))
	m = next.(Model)
	answer := run(cmd) // read 1, its answer not yet applied
	m, held := settle(t, m, event(m, time.Second, upsert(retryingAt("order-1001", t0.Add(time.Minute)))))
	if len(held) != 0 || !m.views.timeline.stale {
		t.Fatalf("an event during the read: stale %v, %d timers; want it marked and no timer yet", m.views.timeline.stale, len(held))
	}
	m, held = settle(t, m, answer[0])
	if got := cb.readsOf("order-1001"); got != 2 || len(held) != 0 {
		t.Fatalf("after the answer: %d reads, %d timers; want a second read at once (the first began a second ago)", got, len(held))
	}
}

// TestTimelineFollowsOnlyFromTheBottom: new events scroll into view when the
// last one was shown; otherwise the lines on screen stay put.
func TestTimelineFollowsOnlyFromTheBottom(t *testing.T) {
	t.Parallel()
	m, cb := jumpConsole(t)
	m = endedStream(m)
	cb.setHistory("order-1001", 40)
	for _, k := range []string{"j", "j", "j", "j"} {
		m = press(m, k)
	}
	m, _ = settle(t, m, keyMsg("w"))
	rows := m.timelineRows()
	if m.views.timeline.scroll != 0 || rows >= 40 {
		t.Fatalf("opened at scroll %d with %d rows; want the top of a history longer than the screen", m.views.timeline.scroll, rows)
	}
	m = press(m, "j")
	cb.setHistory("order-1001", 45)
	m, _ = settle(t, m, event(m, time.Second, upsert(retryingAt("order-1001", t0.Add(time.Minute)))))
	if m.views.timeline.scroll != 1 || len(m.views.timeline.events) != 45 {
		t.Fatalf("in the middle: scroll %d with %d events, want 1 and 45", m.views.timeline.scroll, len(m.views.timeline.events))
	}
	m = press(m, "G")
	if want := 45 - rows; m.views.timeline.scroll != want {
		t.Fatalf("G: scroll %d, want %d", m.views.timeline.scroll, want)
	}
	cb.setHistory("order-1001", 50)
	m, _ = settle(t, m, event(m, 2*time.Second, upsert(retryingAt("order-1001", t0.Add(time.Minute)))))
	if want := 50 - rows; m.views.timeline.scroll != want {
		t.Fatalf("at the bottom: scroll %d after 5 more events, want %d", m.views.timeline.scroll, want)
	}
	if v := ansi.Strip(m.View()); !strings.Contains(v, fmt.Sprintf(" %-4d ", 50)) {
		t.Fatalf("the newest event is not on screen:\n%s", v)
	}
}

// listCursor is the cursor of list screen s.
func listCursor(m Model, s screen) int {
	switch s {
	case screenAttempts:
		return m.views.attempts.cursor
	case screenDeadLetters:
		return m.views.dead.cursor
	case screenWorkflows:
		return m.views.workflows.cursor
	}
	panic(fmt.Sprintf("no cursor kept for screen %d", s))
}
