package tui

import (
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// key routes a key press: the dialog first, then the filter input, then the
// bindings of the current screen.
func (m Model) key(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	// Keys typed faster than the terminal is read (or sent by a script)
	// arrive as one message of several runes: take them one at a time.
	if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste && !m.filtering {
		var cmds []tea.Cmd
		var next tea.Model = m
		for _, r := range msg.Runes {
			var cmd tea.Cmd
			next, cmd = next.(Model).key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt})
			cmds = append(cmds, cmd)
		}
		return next, tea.Batch(cmds...)
	}
	if m.confirm != nil {
		if m.confirmBlocked(msg) {
			return m.refuse(), nil
		}
		return m.answerConfirm(msg)
	}
	if m.filtering {
		return m.filterKey(msg)
	}
	m.flash = flash{}
	next, cmd := m.screenKey(msg)
	if n, ok := next.(Model); ok {
		return n.guardWrite(m, cmd)
	}
	return next, cmd
}

// screenKey does what a key means on the current screen: the screen's own
// keys first, then those every screen shares.
func (m Model) screenKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	if next, cmd, ok := m.active().Update(m, msg); ok {
		return next, cmd
	}
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		return m, tea.Quit
	case key.Matches(msg, k.Help):
		m.help.ShowAll = !m.help.ShowAll
		return m.clampAll(), nil
	case key.Matches(msg, k.NextView):
		current := m.screen
		if !current.isList() {
			current = m.back
		}
		return m.show((current + 1) % (lastList + 1))
	case key.Matches(msg, k.Back):
		return m.escape(), nil
	case key.Matches(msg, k.Filter):
		if _, ok := m.active().(filtered); !ok {
			return m, nil // no filter on the audit log or a detail
		}
		m.filtering = true
		m.input.SetValue(m.filterText())
		m.input.CursorEnd()
		return m, m.input.Focus()
	case key.Matches(msg, k.CancelOp):
		// Elsewhere than the operations, x is about the operation whose
		// progress has the status line.
		return m.askCancel(m.statusOp()), nil
	case key.Matches(msg, k.Reconnect):
		return m.reconnectNow()
	case key.Matches(msg, k.Copy):
		return m.say("nothing here to copy"), nil
	}
	for i, b := range k.views() {
		if s := screen(i); s <= lastList && key.Matches(msg, b) {
			return m.show(s)
		}
	}
	return m, nil
}

// show switches to a list screen.
func (m Model) show(s screen) (Model, tea.Cmd) {
	was := m.screen
	m.screen = s
	m = m.clampAll()
	if e, ok := m.active().(entered); ok && was != s {
		return e.Enter(m)
	}
	return m, nil
}

// escape clears the filter of a list, if it has one.
func (m Model) escape() Model {
	if m.filterText() != "" {
		m.input.SetValue("")
		return m.setFilter("")
	}
	return m
}

func (m Model) filterKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	switch msg.Type {
	case tea.KeyEsc:
		m.filtering = false
		m.input.Blur()
		return m.setFilter(""), nil
	case tea.KeyEnter:
		if m.filterErr != "" {
			// The bar keeps the keyboard until the words read, so what
			// the list shows is never other than what the bar says.
			return m, nil
		}
		m.filtering = false
		m.input.Blur()
		return m, nil
	case tea.KeyCtrlC:
		return m, tea.Quit
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(msg)
	m = m.setFilter(m.input.Value())
	return m, cmd
}

// currentFilter is the filter of the current list screen.
func (m Model) currentFilter() filter {
	if f, ok := m.active().(filtered); ok {
		return f.Filter(m)
	}
	return filter{}
}

// filterText is the current filter as typed, empty when there is none.
func (m Model) filterText() string {
	if f := m.currentFilter(); !f.empty() {
		return f.text
	}
	return ""
}

// filterCanonical is the current filter in canonical words.
func (m Model) filterCanonical() string { return m.currentFilter().canonical() }

// listLen is the number of rows the current list shows under its filter.
func (m Model) listLen() int {
	if f, ok := m.active().(filtered); ok {
		return f.Len(m)
	}
	return 0
}

// setFilter rebuilds the current list for a new filter and resets its
// cursor. Words that do not read leave the list as it was and say why.
func (m Model) setFilter(text string) Model {
	c, ok := m.active().(filtered)
	if !ok {
		return m
	}
	f, err := parseFilter(text, c)
	if err != nil {
		m.filterErr = err.Error()
		return m
	}
	m.filterErr = ""
	// Same selection (a space, a key's case): keep the cursor.
	return c.SetFilter(m, f, f.canonical() == m.filterCanonical())
}

// openActivity drills down from an activity row: to its detail, or for a
// stalled workflow task, to its queue. History is fetched here, once per
// open.
func (m Model) openActivity(a *durablev1.PendingActivity) (Model, tea.Cmd) {
	if isWorkflowTask(a) {
		// The cause of a stalled workflow task is its queue.
		return m.openQueue(a.GetTaskQueue()), nil
	}
	m = m.openFrom(screenDetail)
	m.views.detail = detailScreen{detail: detail{key: keyOf(a), last: a, loading: true}}
	return m, historyCmd(m.p.Context, m.p.Backend, a.GetWorkflowId())
}

// askRedriveOf asks to redrive one letter.
func (m Model) askRedriveOf(a *durablev1.PendingActivity) Model {
	return m.askRedrive([]ref{refOf(a)}, fmt.Sprintf("%s / %s %s", activity.EscapeID(a.GetWorkflowId()), activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType())), false)
}
