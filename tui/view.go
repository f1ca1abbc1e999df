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
	if m.confirm != nil {
		return m.help.View(m.keys.forDialog(m.confirm.editing))
	}
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

// confirmView is the redrive dialog, centred in the body. It names what it
// will touch (the count, the selection and the first letters) and the reason
// that will go to the audit log.
func (m Model) confirmView(h int) string {
	st := m.styles
	c := m.confirm
	textW := dialogWidth(m.width)
	n := plural(len(c.refs), "dead letter", "dead letters")
	lines := []string{
		st.Warning.Render("Redrive " + n + "?"),
		"",
		ansi.Truncate(c.what, textW, "…"),
	}
	if len(c.refs) > 1 {
		lines = append(lines, refsLine(c.refs, textW))
		secs := (len(c.refs) + m.p.RedrivesPerSecond - 1) / m.p.RedrivesPerSecond
		lines = append(lines, st.Muted.Render(fmt.Sprintf("released at %d per second (~%ds), each as attempt 1", m.p.RedrivesPerSecond, secs)))
	} else {
		lines = append(lines, st.Muted.Render("it runs again as attempt 1"))
	}
	lines = append(lines, "")
	if c.editing {
		lines = append(lines, c.reason.View(), "",
			st.Label.Render("enter")+" redrive    "+st.Label.Render("esc")+" cancel")
	} else {
		lines = append(lines, st.Label.Render("reason: ")+st.Muted.Render("none · press e to give one for the audit log"), "",
			st.Label.Render("y")+" redrive    "+st.Label.Render("e")+" give a reason    "+st.Label.Render("any other key")+" cancel")
	}
	// Every line padded to one width, so the box keeps its size when the
	// reason line opens.
	for i, l := range lines {
		lines[i] = fit(l, textW)
	}
	box := st.Dialog.Render(strings.Join(lines, "\n"))
	return lipgloss.Place(m.width, h, lipgloss.Center, lipgloss.Center, box)
}

// dialogWidth is the width of the dialog's text: the terminal less the box's
// border, padding and a margin, and no wider than a comfortable line.
func dialogWidth(termWidth int) int {
	return max(min(termWidth-12, 66), 10)
}

// refsLine names the first letters of a selection, and how many more, in at
// most w cells: "order-0991/1, order-0990/1 and 38 more".
func refsLine(refs []ref, w int) string {
	var b strings.Builder
	for i, r := range refs {
		name := r.workflowID + "/" + r.activityID
		sep := ""
		if i > 0 {
			sep = ", "
		}
		rest := ""
		if left := len(refs) - i - 1; left > 0 {
			rest = fmt.Sprintf(" and %s more", thousands(left))
		}
		if ansi.StringWidth(b.String()+sep+name+rest) > w && i > 0 {
			return b.String() + fmt.Sprintf(" and %s more", thousands(len(refs)-i))
		}
		b.WriteString(sep + name)
	}
	return b.String()
}
