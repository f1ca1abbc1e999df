package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

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
		part := r.String()
		if i > 0 {
			part = ", " + part
		}
		rest := ""
		if left := len(refs) - i - 1; left > 0 {
			rest = fmt.Sprintf(" and %s more", thousands(left))
		}
		if i > 0 && ansi.StringWidth(b.String()+part+rest) > w {
			return b.String() + fmt.Sprintf(" and %s more", thousands(len(refs)-i))
		}
		b.WriteString(part)
	}
	return b.String()
}
