package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/tinyllm/durable/client"
)

// confirm is the dialog before a redrive or the cancel of an operation. A
// redrive's fixes the targets at the moment the key was pressed, so what runs
// is exactly what the count said. y goes ahead at once without a reason (as
// scripts expect); e opens a line for one.
type confirm struct {
	refs []ref
	what string // "order-42 / 3 ChargeCard", or what a bulk one selects when no words do
	bulk bool   // one bulk call, even for a single letter of a group
	// selected marks a redrive of what a selection shows; sel is that
	// selection, in canonical words (empty: every dead letter).
	selected bool
	sel      client.Selection
	// opID, when set, makes this the dialog before cancelling that
	// operation rather than a redrive.
	opID string
	// override, when set, makes this the dialog before setting a policy
	// override (p on the detail pane).
	override *overrideAsk
	editing  bool // the reason line has the keyboard
	reason   textinput.Model
}

// maxReason bounds the reason typed in the dialog; the daemon takes more,
// but a reason is a line in the audit log, not a report.
const maxReason = 300

// askRedrive opens the confirmation for refs, or says why there is nothing
// to do.
func (m Model) askRedrive(refs []ref, what string, bulk bool) Model {
	if len(refs) == 0 {
		return m.say("nothing to redrive")
	}
	if m.job != nil {
		return m.say("a redrive is still being started")
	}
	m.confirm = &confirm{refs: refs, what: what, bulk: bulk, reason: m.reasonInput("e.g. INC-7, gateway is back")}
	return m
}

// askSelection opens the confirmation for the letters refs that the
// selection sel shows: the dialog names sel in canonical words and the
// count, and the daemon is sent exactly refs.
func (m Model) askSelection(refs []ref, sel client.Selection) Model {
	m = m.askRedrive(refs, "", true)
	if m.confirm != nil {
		m.confirm.selected, m.confirm.sel = true, sel
	}
	return m
}

// reasonInput is the dialog's reason line, closed until e opens it.
func (m Model) reasonInput(placeholder string) textinput.Model {
	in := textinput.New()
	in.Prompt = "reason: "
	in.Placeholder = placeholder
	in.CharLimit = maxReason
	in.Width = reasonWidth(m.width)
	in.PromptStyle = m.styles.Label
	in.Cursor.SetMode(cursor.CursorStatic)
	return in
}

// reasonWidth is how much of the reason the dialog shows: its text width less
// the prompt and the cursor.
func reasonWidth(termWidth int) int {
	return max(dialogWidth(termWidth)-len("reason: ")-1, 1)
}

// answerConfirm handles a key pressed in the dialog. Without the reason line:
// y goes ahead, e opens the reason line, anything else cancels. With it:
// enter goes ahead with the reason, esc cancels, the rest is typing.
func (m Model) answerConfirm(msg tea.KeyMsg) (Model, tea.Cmd) {
	c := *m.confirm
	k := m.keys
	if c.override.typing() {
		return m.overrideWordsKey(msg)
	}
	if c.editing {
		switch {
		case key.Matches(msg, k.Submit):
			m.confirm = nil
			return m.goAhead(c, strings.TrimSpace(c.reason.Value()))
		case key.Matches(msg, k.Cancel):
			return m.cancelConfirm(), nil
		}
		var cmd tea.Cmd
		c.reason, cmd = c.reason.Update(msg)
		m.confirm = &c
		return m, cmd
	}
	switch {
	case key.Matches(msg, k.Confirm):
		m.confirm = nil
		return m.goAhead(c, "")
	case key.Matches(msg, k.EditReason):
		c.editing = true
		cmd := c.reason.Focus()
		m.confirm = &c
		return m, cmd
	}
	return m.cancelConfirm(), nil
}

// goAhead does what the dialog c asked about.
func (m Model) goAhead(c confirm, reason string) (Model, tea.Cmd) {
	if c.opID != "" {
		return m.cancelOperation(c.opID, reason)
	}
	if c.override != nil {
		return m.setOverride(c, reason)
	}
	return m.startRedrive(c, reason)
}

func (m Model) cancelConfirm() Model {
	c := m.confirm
	m.confirm = nil
	if c.override != nil {
		return m.say("no override set for " + c.override.target.String())
	}
	if op, ok := m.ops.get(c.opID); ok && isRunning(op) {
		return m.say(c.opID + " not cancelled: it keeps running")
	} else if c.opID != "" {
		return m.say(c.opID + " left as it is")
	}
	return m.say("redrive cancelled")
}
