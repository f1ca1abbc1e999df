package tui

import (
	"context"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// A timeline is read when it opens, and again whenever the stream says its
// workflow changed (one of its activities or the workflow itself came or
// went), but never twice within refreshEvery: changes that arrive while a
// read is under way or held wait for one more read, so a workflow retrying
// fast costs two reads a second whatever it sends.
const refreshEvery = 500 * time.Millisecond

// timelineHead is the lines above the events: the title, a blank line and
// the column header.
const timelineHead = 3

type (
	// timelineMsg answers a read of the open timeline's history.
	timelineMsg struct {
		seq    int
		events []*durablev1.HistoryEvent
		err    error
	}
	// timelineDueMsg ends the wait before a held read.
	timelineDueMsg struct{ seq int }
)

func tick(d time.Duration, msg tea.Msg) tea.Cmd {
	return tea.Tick(d, func(time.Time) tea.Msg { return msg })
}

func timelineCmd(ctx context.Context, b Backend, seq int, workflowID string) tea.Cmd {
	return func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		events, err := b.History(cctx, workflowID)
		return timelineMsg{seq: seq, events: events, err: err}
	}
}

// openTimeline shows workflow id's history; esc comes back here, to the
// list (cursor where it was) or the detail pane.
func (m Model) openTimeline(id string) (Model, tea.Cmd) {
	from := m.screen
	m = m.openFrom(screenTimeline)
	m.views.timeline = timelineScreen{timeline{workflowID: id, from: from, seq: m.views.timeline.seq + 1, loading: true}}
	return m.readTimeline()
}

func (m Model) readTimeline() (Model, tea.Cmd) {
	t := &m.views.timeline
	t.reading, t.waiting, t.stale, t.lastRead = true, false, false, m.clk.local
	return m, timelineCmd(m.p.Context, m.p.Backend, t.seq, t.workflowID)
}

// readWhenDue reads the timeline now if refreshEvery has passed since the
// last read began, or else when it will have.
func (m Model) readWhenDue() (Model, tea.Cmd) {
	wait := m.views.timeline.lastRead.Add(refreshEvery).Sub(m.clk.local)
	if wait <= 0 {
		return m.readTimeline()
	}
	m.views.timeline.waiting = true
	return m, m.after(wait, timelineDueMsg{seq: m.views.timeline.seq})
}

// touches reports whether ev changed workflow id, or may have: a new
// snapshot follows a reconnection, and what happened in between is unknown.
func touches(ev *durablev1.WatchEvent, id string) bool {
	switch ev.GetKind() {
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE:
		return true
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT:
		for _, a := range ev.GetActivities() {
			if a.GetWorkflowId() == id {
				return true
			}
		}
		for _, w := range ev.GetWorkflows() {
			if w.GetWorkflowId() == id {
				return true
			}
		}
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE:
		for _, r := range ev.GetRemoved() {
			if r.GetWorkflowId() == id {
				return true
			}
		}
	}
	return false
}

// refreshTimeline reads the open timeline again if ev touched its workflow.
func (m Model) refreshTimeline(ev *durablev1.WatchEvent) (Model, tea.Cmd) {
	t := &m.views.timeline
	if m.screen != screenTimeline || !touches(ev, t.workflowID) {
		return m, nil
	}
	if t.reading || t.waiting {
		t.stale = true
		return m, nil
	}
	return m.readWhenDue()
}

// timelineDue reads the held timeline, if it is still the one on screen.
func (m Model) timelineDue(msg timelineDueMsg) (Model, tea.Cmd) {
	t := &m.views.timeline
	if msg.seq != t.seq || !t.waiting {
		return m, nil
	}
	t.waiting = false
	if m.screen != screenTimeline {
		t.stale = false
		return m, nil
	}
	return m.readTimeline()
}

// gotTimeline shows a read of the timeline. The view stays on the events it
// showed, unless it showed the last one: then it follows the new ones in.
func (m Model) gotTimeline(msg timelineMsg) (Model, tea.Cmd) {
	t := &m.views.timeline
	if msg.seq != t.seq {
		return m, nil
	}
	first := t.loading
	t.reading, t.loading = false, false
	switch {
	case msg.err != nil && (first || len(t.events) == 0):
		t.events, t.err = nil, errorText(msg.err)
	case msg.err != nil:
		t.refreshErr = errorText(msg.err)
	default:
		rows := m.timelineRows()
		follow := !first && t.scroll >= maxScroll(len(t.events), rows)
		t.events, t.err, t.refreshErr = msg.events, "", ""
		last := maxScroll(len(t.events), rows)
		if follow {
			t.scroll = last
		} else {
			t.scroll = min(t.scroll, last)
		}
	}
	if t.stale && m.screen == screenTimeline {
		return m.readWhenDue()
	}
	t.stale = false
	return m, nil
}

// timelineRows is how many events the timeline shows at once.
func (m Model) timelineRows() int {
	// bodyRows leaves a line for a table's header; the timeline's header
	// is among its own.
	return max(m.bodyRows()+1-timelineHead, 1)
}

// maxScroll is the scroll that shows the last of n lines, rows at a time.
func maxScroll(n, rows int) int { return max(n-rows, 0) }

// scrollTimeline moves the timeline by delta lines, no further than its end.
func (m Model) scrollTimeline(delta int) Model {
	t := &m.views.timeline
	t.scroll = min(max(t.scroll+delta, 0), maxScroll(len(t.events), m.timelineRows()))
	return m
}
