package tui

import (
	tea "github.com/charmbracelet/bubbletea"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// askCancel opens the dialog before cancelling op, or says why there is
// nothing to cancel.
func (m Model) askCancel(op *durablev1.Operation) Model {
	switch {
	case op == nil && m.screen == screenOperations:
		return m.say("no operation to cancel")
	case op == nil:
		return m.say("no operation is running · 5 lists them")
	case !isRunning(op):
		return m.say(op.GetId() + " " + opEnded(op) + ": nothing to cancel")
	case m.cancelling == op.GetId():
		return m.say("cancelling " + op.GetId() + "…")
	}
	m.confirm = &confirm{opID: op.GetId(), reason: m.reasonInput("e.g. INC-7, the fix did not hold")}
	return m
}

// cancelOperation asks the daemon to cancel operation id.
func (m Model) cancelOperation(id, reason string) (Model, tea.Cmd) {
	m.cancelling, m.flash = id, flash{}
	return m, cancelOpCmd(m.p.Context, m.p.Backend, id, reason)
}

// cancelDone says how the cancel went: the operation as it stopped, or the
// daemon's refusal in words (a reader may not cancel; a finished operation
// cannot be).
func (m Model) cancelDone(msg cancelDoneMsg) Model {
	if m.cancelling == msg.id {
		m.cancelling = ""
	}
	if msg.err != nil {
		return m.warn("cancel of " + msg.id + " failed: " + errorText(msg.err))
	}
	if msg.op.GetId() == "" {
		return m
	}
	m.ops.upsert([]*durablev1.Operation{msg.op})
	op, _ := m.ops.get(msg.id)
	m = m.settle()
	return m.say(opOutcome(op))
}
