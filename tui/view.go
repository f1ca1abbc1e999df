package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// View renders the console from the model alone: the clock is m.now, never
// the wall clock, so a view is a pure function of what Update saw.
func (m Model) View() string {
	helpView := m.helpView()
	bodyH := max(m.height-2-lipgloss.Height(helpView), 1)
	var body string
	switch m.screen {
	case screenAttempts:
		body = m.attemptsView(bodyH)
	case screenDeadLetters:
		body = m.deadLettersView(bodyH)
	case screenWorkflows:
		body = m.workflowsView(bodyH)
	case screenDetail:
		body = m.detailView(bodyH)
	case screenTimeline:
		body = m.timelineView(bodyH)
	}
	if m.confirm != nil {
		body = m.confirmView(bodyH)
	}
	return strings.Join([]string{m.headerView(), m.statusView(), block(body, m.width, bodyH), helpView}, "\n")
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
	return m.help.View(m.keys.forScreen(m.screen))
}

func (m Model) headerView() string {
	st := m.styles
	tabs := []struct {
		s     screen
		label string
		n     int
	}{
		{screenAttempts, "1 attempts", len(m.st.acts)},
		{screenDeadLetters, "2 dead letters", m.st.deadTotal},
		{screenWorkflows, "3 workflows", len(m.st.wfs)},
	}
	parts := []string{st.Title.Render("wfui")}
	current := m.screen
	if current > screenWorkflows {
		current = m.back
	}
	for _, t := range tabs {
		label := fmt.Sprintf("%s (%s)", t.label, thousands(t.n))
		if t.s == current {
			parts = append(parts, st.ActiveTab.Render("["+label+"]"))
		} else {
			parts = append(parts, st.Tab.Render(" "+label+" "))
		}
	}
	left := strings.Join(parts, " ")
	label := m.connLabel()
	if ansi.StringWidth(left)+ansi.StringWidth(label)+m.width/10 > m.width {
		label = strings.TrimSuffix(label, " "+m.p.Addr) // the state matters more than the address
	}
	right := st.Status.Render(label)
	gap := m.width - ansi.StringWidth(left) - ansi.StringWidth(right)
	if gap < 1 {
		return ansi.Truncate(left+" "+right, m.width, "…")
	}
	return left + strings.Repeat(" ", gap) + right
}

func (m Model) connLabel() string {
	addr := m.p.Addr
	switch {
	case m.conn.live:
		return "● live " + addr
	case !m.conn.synced && m.conn.failures == 0:
		return "○ connecting " + addr
	}
	return "○ offline " + addr
}

// statusView is the one line under the header: the filter being typed, a
// disconnection, a redrive's progress, or the outcome of the last action.
func (m Model) statusView() string {
	st := m.styles
	var s string
	switch {
	case m.filtering:
		s = m.input.View()
	case !m.conn.live && m.conn.failures > 0:
		s = st.Banner.Render(m.bannerText())
	case m.job != nil && !m.job.finished():
		s = st.Progress.Render(m.job.progressLine(m.width, m.p.RedrivesPerSecond))
	case m.flash != "":
		s = st.Label.Render(m.flash)
	case m.screen <= screenWorkflows && m.filterText() != "":
		s = st.Filter.Render(fmt.Sprintf("filter /%s — %s shown · esc clears", m.filterText(), thousands(m.listLen(m.screen))))
	case !m.conn.synced:
		s = st.Muted.Render("waiting for the daemon's snapshot…")
	}
	return ansi.Truncate(s, m.width, "…")
}

func (m Model) bannerText() string {
	if m.conn.retrying {
		return "disconnected — reconnecting…  (" + oneLine(m.conn.lastErr) + ")"
	}
	left := m.conn.retryAt.Sub(m.now)
	secs := int((left + 999_999_999) / 1_000_000_000)
	return fmt.Sprintf("disconnected — reconnecting in %ds  (%s)", max(secs, 0), oneLine(m.conn.lastErr))
}

// confirmView is the redrive dialog, centred in the body.
func (m Model) confirmView(h int) string {
	st := m.styles
	c := m.confirm
	n := plural(len(c.refs), "dead letter", "dead letters")
	lines := []string{
		st.Warning.Render("Redrive " + n + "?"),
		"",
		ansi.Truncate(c.what, max(m.width-12, 10), "…"),
	}
	if len(c.refs) > 1 {
		secs := (len(c.refs) + m.p.RedrivesPerSecond - 1) / m.p.RedrivesPerSecond
		lines = append(lines, st.Muted.Render(fmt.Sprintf("released at %d per second (~%ds), each as attempt 1", m.p.RedrivesPerSecond, secs)))
	} else {
		lines = append(lines, st.Muted.Render("it runs again as attempt 1"))
	}
	lines = append(lines, "", st.Label.Render("y")+" redrive    "+st.Label.Render("any other key")+" cancel")
	box := st.Dialog.Render(strings.Join(lines, "\n"))
	return lipgloss.Place(m.width, h, lipgloss.Center, lipgloss.Center, box)
}
