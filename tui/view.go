package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// View renders the console from the model alone: the clock is m.now, never
// the wall clock, so a view is a pure function of what Update saw.
func (m Model) View() string {
	helpView, status := m.helpView(), m.statusView()
	bodyH := max(m.height-1-lipgloss.Height(status)-lipgloss.Height(helpView), 1)
	body := m.active().View(m, bodyH)
	if m.confirm != nil {
		body = m.confirmView(bodyH)
	}
	return strings.Join([]string{m.headerView(), status, block(body, m.width, bodyH), helpView}, "\n")
}

// block makes s exactly h lines of at most w cells, so the help bar stays at
// the bottom whatever the body holds.
func block(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		if ansi.StringWidth(l) > w {
			lines[i] = ansi.Truncate(l, w, "…")
		}
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

func (m Model) helpView() string {
	if m.confirm != nil {
		return m.help.View(m.keys.forDialog(m.confirm))
	}
	km := m.keys
	// Quitting leaves an operation running in the daemon: the help says so
	// while one this console started runs.
	if ops := m.StillRunning(); len(ops) > 0 {
		km.Quit.SetHelp("q", "quit ("+ops[len(ops)-1].GetId()+" keeps running)")
	}
	keys := km.forScreen(m.active())
	if op := m.statusOp(); op != nil && m.screen != screenOperations && m.screen != screenOperation {
		x := km.CancelOp
		x.SetHelp("x", "cancel "+op.GetId())
		keys.short = append([]key.Binding{x}, keys.short...)
	}
	if m.writesBlocked() != "" {
		keys = keys.withoutWrites(km.writes())
	}
	out := ""
	if !m.conn.live && m.conn.failures > 0 {
		// ctrl+r leads the help bar when it fits beside the rest (the
		// banner above says it in any case), and the full help lists it
		// with the screen's own keys.
		keys.full[0] = append(append([]key.Binding{}, keys.full[0]...), km.Reconnect)
		with := keys
		with.short = append([]key.Binding{km.Reconnect}, keys.short...)
		if v := m.help.View(with); m.help.ShowAll || !strings.HasSuffix(ansi.Strip(v), "…") {
			out = v
		}
	}
	if out == "" {
		out = m.help.View(keys)
	}
	if _, ok := m.active().(filtered); ok && m.help.ShowAll {
		out += "\n\n" + m.selectionHelp()
	}
	return out
}

// statusOp is the running operation the status line follows: the newest one
// this console started, or else the newest one running.
func (m Model) statusOp() *durablev1.Operation {
	if op := m.followed(); op != nil {
		return op
	}
	if ops := m.ops.running(); len(ops) > 0 {
		return ops[0]
	}
	return nil
}

func (m Model) headerView() string {
	st := m.styles
	// What gives way first when the tabs and the connection do not fit:
	// the padding of the tabs, then the daemon's address (its state
	// matters more), then the title, then the other tabs' names.
	full := m.connLabel()
	short := strings.TrimSuffix(full, " "+m.p.Addr)
	var left, label string
	for _, try := range []struct {
		squeeze int
		label   string
	}{{0, full}, {1, full}, {1, short}, {2, short}, {3, short}} {
		left, label = m.tabsView(try.squeeze), try.label
		if ansi.StringWidth(left)+1+ansi.StringWidth(label) <= m.width {
			break
		}
	}
	right := st.Status.Render(label)
	gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(right)
	if gap < 1 {
		return ansi.Truncate(left+" "+right, m.width, "…")
	}
	return left + strings.Repeat(" ", gap) + right
}

// tabsView is the title and a tab per list screen, the current one in
// brackets. For narrow terminals, squeeze 1 drops the padding around the
// others, 2 the title too, and 3 the names of the other tabs, keeping
// their keys and counts.
func (m Model) tabsView(squeeze int) string {
	st := m.styles
	var parts []string
	if squeeze < 2 {
		parts = append(parts, st.Title.Render("wfui"))
	}
	current := m.screen
	if !current.isList() {
		current = m.back
	}
	for ts := screen(0); ts <= lastList; ts++ {
		t, ok := m.views.get(ts).(tabbed)
		if !ok {
			continue
		}
		name, count := t.Tab(m)
		key := fmt.Sprint(int(ts) + 1)
		switch {
		case ts == current:
			parts = append(parts, st.ActiveTab.Render("["+key+" "+name+count+"]"))
		case squeeze >= 3:
			parts = append(parts, st.Tab.Render(key+count))
		case squeeze >= 1:
			parts = append(parts, st.Tab.Render(key+" "+name+count))
		default:
			parts = append(parts, st.Tab.Render(" "+key+" "+name+count+" "))
		}
	}
	return strings.Join(parts, " ")
}

func (m Model) connLabel() string {
	addr := m.p.Addr
	switch {
	case m.conn.live && m.conn.writes.GetRefused():
		return "● live, read only " + addr
	case m.conn.live:
		return "● live " + addr
	case !m.conn.synced && m.conn.failures == 0:
		return "○ connecting " + addr
	case m.stale():
		return "○ offline · " + m.asOfText() + " " + addr
	}
	return "○ offline " + addr
}

// statusView is the line under the header (two for an error): the filter
// being typed, a disconnection, an error, the outcome of the last action, a
// redrive being started or an operation's progress (the one this console
// started before the filter, one started elsewhere after it).
func (m Model) statusView() string {
	st := m.styles
	var s string
	switch {
	case m.filtering:
		return m.filterBarView()
	case m.flash.refused && m.writesBlocked() != "":
		// Why the key just pressed did nothing, as things stand now.
		return m.twoLines(m.writesBlocked(), st.Warning)
	case !m.conn.live && m.conn.failures > 0:
		s = st.Banner.Render(m.bannerText())
	case m.flash.text != "" && !m.flash.refused:
		// An outcome is read in full (an error, or what an operation left
		// in the dead-letter queue): it may take a second line.
		style := st.Label
		if m.flash.warn {
			style = st.Warning
		}
		return m.twoLines(m.flashText(), style)
	case m.conn.writes.GetRefused():
		// It stays until the daemon says writes are back: nothing this
		// console asks to change can happen meanwhile.
		since := m.conn.writes.GetSince()
		return m.twoLines("writes refused since "+since.AsTime().UTC().Format("15:04:05 UTC")+" ("+auditAge(m.now, since)+" ago) — "+
			oneLine(m.conn.writes.GetReason()), st.Warning)
	case m.job != nil && m.job.bulk:
		s = st.Progress.Render("starting a redrive of " + plural(len(m.job.refs), "dead letter", "dead letters") + "…")
	case m.job != nil:
		s = st.Progress.Render("redriving " + m.job.refs[0].String() + "…")
	case m.cancelling != "" && (m.statusOp() == nil || m.statusOp().GetId() != m.cancelling):
		s = st.Progress.Render("cancelling " + m.cancelling + "…")
	case m.followed() != nil:
		s = st.Progress.Render(m.opProgressLine(m.followed()))
	case m.filterText() != "":
		s = st.Filter.Render(m.filterLine())
	case !m.conn.synced:
		s = st.Muted.Render("waiting for the daemon's snapshot…")
	case m.statusOp() != nil:
		s = st.Progress.Render(m.opProgressLine(m.statusOp()))
	default:
		if c, ok := m.active().(statusful); ok {
			s = c.Status(m)
		}
	}
	return ansi.Truncate(s, m.width, "…")
}

// twoLines wraps text to the width in style, in at most two lines, the
// second cut with an ellipsis.
func (m Model) twoLines(text string, style lipgloss.Style) string {
	lines := strings.Split(ansi.Wrap(text, max(m.width, 1), " "), "\n")
	if len(lines) > 2 {
		lines = []string{lines[0], lines[1] + " " + strings.Join(lines[2:], " ")}
	}
	for i, l := range lines {
		lines[i] = style.Render(ansi.Truncate(l, m.width, "…"))
	}
	return strings.Join(lines, "\n")
}

func (m Model) bannerText() string {
	if m.conn.retrying {
		return "disconnected — reconnecting…  (" + oneLine(m.conn.lastErr) + ")"
	}
	return "disconnected — reconnecting in " + m.reconnectIn() + ", ctrl+r now  (" + oneLine(m.conn.lastErr) + ")"
}
