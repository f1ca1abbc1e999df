package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// confirmView is the dialog, centred in the body. A redrive's names what it
// will touch (the count, the selection and the first letters) and the reason
// that will go to the audit log.
func (m Model) confirmView(h int) string {
	if m.confirm.opID != "" {
		return m.cancelDialogView(h)
	}
	if m.confirm.override != nil {
		return m.overrideDialogView(h)
	}
	st := m.styles
	c := m.confirm
	textW := dialogWidth(m.width)
	n := plural(len(c.refs), "dead letter", "dead letters")
	lines := []string{
		st.Warning.Render("Redrive " + n + "?"),
		"",
	}
	if c.selected {
		lines = append(lines, m.selectionLines(c, textW)...)
	} else {
		lines = append(lines, ansi.Truncate(c.what, textW, "…"))
	}
	if len(c.refs) > 1 {
		lines = append(lines, refsLine(c.refs, textW))
		secs := (len(c.refs) + m.p.RedrivesPerSecond - 1) / m.p.RedrivesPerSecond
		lines = append(lines,
			st.Muted.Render(fmt.Sprintf("the daemon releases them at %d/s (~%ds), each as attempt 1;", m.p.RedrivesPerSecond, secs)),
			st.Muted.Render("x cancels it; quitting the console does not stop it"))
		lines = append(lines, m.runningBesideLines(textW)...)
	} else if c.bulk {
		lines = append(lines, st.Muted.Render("it runs again as attempt 1, released by a redrive operation"))
	} else {
		lines = append(lines, st.Muted.Render("it runs again as attempt 1"))
	}
	lines = append(lines, "")
	lines = append(lines, m.reasonLines("redrive", "cancel")...)
	return m.dialogBox(lines, h)
}

// runningBesideLines name the redrive operations running now: letters that
// one of them and the redrive being confirmed both hold go out at the sum
// of their rates.
func (m Model) runningBesideLines(textW int) []string {
	var running []string
	for i := range m.ops.set.Len() {
		if op := m.ops.set.At(i); isRunning(op) {
			running = append(running, fmt.Sprintf("%s (%s, %s)", op.GetId(), opSelection(op), rateText(op.GetRate())))
		}
	}
	if len(running) == 0 {
		return nil
	}
	st := m.styles
	head := plural(len(running), "operation", "operations") + " already running:"
	if len(running) == 1 {
		head = "already running:"
	}
	return []string{
		st.Warning.Render(ansi.Truncate(head+" "+strings.Join(running, ", "), textW, "…")),
		st.Warning.Render(ansi.Truncate("letters both hold go out at the sum of the rates", textW, "…")),
	}
}

// selectionLines name what a bulk redrive selected: the filter in the words
// wf --select reads, the count, and, for free text (which matches by
// substring), a warning to read the letters.
func (m Model) selectionLines(c *confirm, textW int) []string {
	st := m.styles
	words := c.sel.String()
	if words == "" {
		words = "every dead letter (no filter)"
	}
	lines := []string{st.Label.Render("filter ") + ansi.Truncate(words, textW-len("filter "), "…")}
	sent := fmt.Sprintf("exactly these %s are sent, by name", thousands(len(c.refs)))
	if len(c.refs) == 1 {
		sent = "exactly this one is sent, by name"
	}
	lines = append(lines, st.Muted.Render(ansi.Truncate(sent+"; any no longer dead are skipped", textW, "…")))
	if c.sel.HasText() {
		lines = append(lines, st.Warning.Render(ansi.Truncate("free text matches by substring: check the letters named", textW, "…")))
	}
	return lines
}

// reasonLines are the dialog's last lines: the reason (or how to give one)
// and the keys, with what y and the rest do.
func (m Model) reasonLines(yes, no string) []string {
	st := m.styles
	c := m.confirm
	if c.editing {
		return []string{c.reason.View(), "",
			st.Label.Render("enter") + " " + yes + "    " + st.Label.Render("esc") + " " + no}
	}
	return []string{st.Label.Render("reason: ") + st.Muted.Render("none · press e to give one for the audit log"), "",
		st.Label.Render("y") + " " + yes + "    " + st.Label.Render("e") + " give a reason    " + st.Label.Render("any other key") + " " + no}
}

// dialogBox frames the dialog's lines and centres it in h lines.
func (m Model) dialogBox(lines []string, h int) string {
	textW := dialogWidth(m.width)
	// Every line padded to one width, so the box keeps its size when the
	// reason line opens.
	for i, l := range lines {
		lines[i] = fit(l, textW)
	}
	box := m.styles.Dialog.Render(strings.Join(lines, "\n"))
	return lipgloss.Place(m.width, h, lipgloss.Center, lipgloss.Center, box)
}

// cancelDialogView is the dialog before cancelling an operation: it names
// the operation and says, live, what stays where.
func (m Model) cancelDialogView(h int) string {
	st := m.styles
	c := m.confirm
	textW := dialogWidth(m.width)
	lines := []string{st.Warning.Render("Cancel " + c.opID + "?"), ""}
	op, ok := m.ops.get(c.opID)
	if !ok {
		lines = append(lines, st.Muted.Render("the daemon no longer reports it"))
	} else {
		what := "a redrive of " + opSelection(op)
		if op.GetListed() {
			what = "a redrive of " + plural(int(op.GetMatched()), "dead letter", "dead letters") + " listed by name"
		}
		lines = append(lines, ansi.Truncate(what, textW, "…"))
		started := "started"
		if p := op.GetPrincipal(); p != "" {
			started += " by " + p
		}
		started += " " + auditAge(m.now, op.GetStartedTime()) + " ago"
		if r := oneLine(op.GetReason()); r != "" {
			started += fmt.Sprintf(": %q", r)
		}
		lines = append(lines, st.Muted.Render(ansi.Truncate(started, textW, "…")), "")
		done := fmt.Sprintf("%s: %s of %s released", op.GetId(), thousands(int(op.GetReleased())), thousands(int(op.GetMatched())))
		if n := op.GetSkipped(); n > 0 {
			done += fmt.Sprintf(", %s skipped", thousands(int(n)))
		}
		if isRunning(op) {
			done += fmt.Sprintf("; the %s left stay in the DLQ", thousands(int(op.GetLeft())))
		} else {
			done = fmt.Sprintf("it %s meanwhile · %s", opEnded(op), done)
		}
		lines = append(lines, strings.Split(ansi.Wordwrap(done, textW, " "), "\n")...)
		if isRunning(op) {
			lines = append(lines, st.Muted.Render("what it released stays released; nothing more of it goes back"))
		}
	}
	lines = append(lines, "")
	lines = append(lines, m.reasonLines("cancel "+c.opID, "keep it running")...)
	return m.dialogBox(lines, h)
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
