package tui

import (
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/tinyllm/durable/activity"
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

// screenKey does what a key means on the current screen.
func (m Model) screenKey(msg tea.KeyMsg) (tea.Model, tea.Cmd) {
	k := m.keys
	switch {
	case key.Matches(msg, k.Quit):
		return m, tea.Quit
	case key.Matches(msg, k.Help):
		m.help.ShowAll = !m.help.ShowAll
		return m.clampAll(), nil
	case key.Matches(msg, k.Attempts):
		return m.show(screenAttempts), nil
	case key.Matches(msg, k.DeadLetter):
		return m.show(screenDeadLetters), nil
	case key.Matches(msg, k.Workflows):
		return m.show(screenWorkflows), nil
	case key.Matches(msg, k.Audit):
		return m.show(screenAudit), nil
	case key.Matches(msg, k.Operations):
		return m.show(screenOperations), nil
	case key.Matches(msg, k.Queues):
		return m.show(screenQueues), nil
	case key.Matches(msg, k.Stats):
		return m.enterStats()
	case key.Matches(msg, k.NextView):
		current := m.screen
		if !current.isList() {
			current = m.back
		}
		next := (current + 1) % (lastList + 1)
		if next == screenStats {
			return m.enterStats()
		}
		return m.show(next), nil
	case key.Matches(msg, k.Up):
		return m.move(-1), nil
	case key.Matches(msg, k.Down):
		return m.move(1), nil
	case key.Matches(msg, k.PageUp):
		return m.move(-m.bodyRows()), nil
	case key.Matches(msg, k.PageDown):
		return m.move(m.bodyRows()), nil
	case key.Matches(msg, k.Top):
		return m.move(-1 << 30), nil
	case key.Matches(msg, k.Bottom):
		return m.move(1 << 30), nil
	case key.Matches(msg, k.Back):
		return m.escape(), nil
	case key.Matches(msg, k.Filter):
		if m.screen > screenWorkflows { // no filter on the audit log or a detail
			return m, nil
		}
		m.filtering = true
		m.input.SetValue(m.filterText())
		m.input.CursorEnd()
		return m, m.input.Focus()
	case key.Matches(msg, k.Open):
		return m.open()
	case key.Matches(msg, k.Group):
		if m.screen == screenDeadLetters {
			m.grouped = !m.grouped
			return m.clampAll(), nil
		}
	case key.Matches(msg, k.Sort) && m.screen == screenAttempts:
		return m.cycleSort(), nil
	case key.Matches(msg, k.NextStuck) && m.screen == screenAttempts:
		return m.nextStuck(), nil
	case key.Matches(msg, k.HideDead) && m.screen == screenAttempts:
		return m.toggleDead(), nil
	case key.Matches(msg, k.Redrive):
		return m.redriveSelected(), nil
	case key.Matches(msg, k.RedriveAll):
		return m.redriveAll(), nil
	case key.Matches(msg, k.CancelOp):
		return m.askCancel(m.cancelTarget()), nil
	case key.Matches(msg, k.Reconnect):
		return m.reconnectNow()
	case key.Matches(msg, k.Timeline):
		return m.jumpToTimeline()
	case key.Matches(msg, k.Copy):
		return m.copySelected()
	case key.Matches(msg, k.Override) && m.screen == screenDetail:
		return m.askOverride()
	}
	return m, nil
}

// show switches to a list screen.
func (m Model) show(s screen) Model {
	m.screen = s
	return m.clamp(s)
}

// escape leaves the detail or timeline, or else clears the filter and grouping.
func (m Model) escape() Model {
	switch m.screen {
	case screenTimeline:
		m.screen = m.timeline.from
		return m
	case screenDetail, screenAuditRecord, screenOperation, screenQueue:
		m.screen = m.back
		return m
	}
	if m.filterText() != "" {
		m.input.SetValue("")
		return m.setFilter("")
	}
	if m.screen == screenDeadLetters && m.grouped {
		m.grouped = false
		return m.clampAll()
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
	switch m.screen {
	case screenAttempts:
		return m.st.attempts.filter
	case screenDeadLetters:
		return m.st.dead.filter
	case screenWorkflows:
		return m.st.wfFilter
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

// setFilter rebuilds the current list for a new filter and resets its
// cursor. Words that do not read leave the list as it was and say why.
func (m Model) setFilter(text string) Model {
	f, err := parseFilter(text, m.screen)
	if err != nil {
		m.filterErr = err.Error()
		return m
	}
	m.filterErr = ""
	if f.canonical() == m.filterCanonical() {
		// Same selection (a space, a key's case): keep the cursor.
		switch m.screen {
		case screenAttempts:
			m.st.attempts.filter.text = text
		case screenDeadLetters:
			m.st.dead.filter.text = text
		case screenWorkflows:
			m.st.wfFilter.text = text
		}
		return m
	}
	switch m.screen {
	case screenAttempts:
		m.st.refilterActivities(false, f)
	case screenDeadLetters:
		m.st.refilterActivities(true, f)
		m.groupList = list{}
	case screenWorkflows:
		m.st.refilterWorkflows(f)
	default:
		return m
	}
	m.lists[m.screen] = list{}
	return m.clamp(m.screen)
}

// open drills down: an activity to its detail, a group to its letters, a
// workflow to its timeline. History is fetched here, once per open.
func (m Model) open() (tea.Model, tea.Cmd) {
	switch m.screen {
	case screenAttempts, screenDeadLetters:
		if g := m.selectedGroup(); g != nil {
			return m.openGroup(g), nil
		}
		a := m.selectedActivity()
		if a == nil {
			return m, nil
		}
		if isWorkflowTask(a) {
			// The cause of a stalled workflow task is its queue.
			return m.openQueue(a.GetTaskQueue()), nil
		}
		m.back, m.screen = m.screen, screenDetail
		m.detail = detail{key: keyOf(a), last: a, loading: true}
		return m, historyCmd(m.p.Context, m.p.Backend, a.GetWorkflowId())
	case screenWorkflows:
		return m.jumpToTimeline()
	case screenAudit:
		if r := m.selectedAudit(); r != nil {
			m.back, m.screen = m.screen, screenAuditRecord
			m.audit.open, m.audit.scroll = r.GetId(), 0
		}
	case screenOperations:
		if op := m.selectedOp(); op != nil {
			m.back, m.screen = m.screen, screenOperation
			m.ops.open, m.ops.scroll = op.GetId(), 0
		}
	case screenQueues:
		if c := m.lists[screenQueues].cursor; c < len(m.st.queues.list) {
			return m.openQueue(m.st.queues.list[c].GetName()), nil
		}
	}
	return m, nil
}

// redriveSelected asks to redrive the letter (or group) under the cursor, or
// the one in the detail pane.
func (m Model) redriveSelected() Model {
	switch m.screen {
	case screenDeadLetters:
		if g := m.selectedGroup(); g != nil {
			return m.askGroup(g)
		}
		if a := m.selectedActivity(); a != nil {
			return m.askRedrive([]ref{refOf(a)}, fmt.Sprintf("%s / %s %s", activity.EscapeID(a.GetWorkflowId()), activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType())), false)
		}
	case screenDetail:
		if a := m.detailActivity(); a != nil && isDead(a) {
			return m.askRedrive([]ref{refOf(a)}, fmt.Sprintf("%s / %s %s", activity.EscapeID(a.GetWorkflowId()), activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType())), false)
		}
	}
	return m
}

// redriveAll asks to redrive every letter the dead-letter view shows: the
// selected group when grouped, else everything matching the filter.
func (m Model) redriveAll() Model {
	if m.screen != screenDeadLetters {
		return m
	}
	if g := m.selectedGroup(); g != nil {
		return m.askGroup(g)
	}
	set := m.st.dead.set
	refs := make([]ref, 0, set.Len())
	for i := 0; i < set.Len(); i++ {
		refs = append(refs, refOf(set.At(i)))
	}
	return m.askSelection(refs, m.st.dead.filter.sel)
}
