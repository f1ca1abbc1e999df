package tui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// component is one screen of the console, after soft-serve's Component: it
// answers the keys pressed on it (Update), draws its body at the size it is
// given (View), lists its keys for the help bar (Help) and keeps its own
// place — cursor, scroll, what it has open — valid as the size and the data
// change (SetSize).
//
// What every screen reads (the daemon's state, the clock, the connection,
// the logs of audit records and operations, the styles) is the console's,
// and reaches a component as the console passed to each call. A component
// changes the console, itself included, only by returning it: each one is
// a value in Model.views, so a Model stays a value that tea can copy.
//
// The console handles what all screens share — the keys that switch views,
// quit, help, reconnect, the filter bar, the dialogs, the status line — and
// forwards the rest to the active screen. A new view is a type with these
// four methods, a field of views and a case in views.get.
type component interface {
	// Update answers a key pressed on the screen. handled is false for a
	// key the screen has no use for; the console's own keys then get it.
	Update(m Model, msg tea.KeyMsg) (next Model, cmd tea.Cmd, handled bool)
	// View is the body: at most m.width cells wide and h lines high.
	View(m Model, h int) string
	// Help is the screen's own keys: short for the help bar, full for ?
	// (nil full: the same as short).
	Help(k KeyMap) (short, full []key.Binding)
	// SetSize keeps the screen's place valid for a body of rows table rows
	// and the data in m.
	SetSize(m Model, rows int) Model
}

// The optional parts of a screen, which the console asks for by type.
type (
	// tabbed is a list screen with a tab in the header: its name and a
	// count (" (12)", or "" for none).
	tabbed interface {
		Tab(m Model) (name, count string)
	}
	// entered is a screen that does something each time it is switched
	// to from another (the stats view reads its numbers).
	entered interface {
		Enter(m Model) (Model, tea.Cmd)
	}
	// filtered is a list the / bar narrows, with the words of a
	// client.Selection.
	filtered interface {
		// Filter is the filter in force.
		Filter(m Model) filter
		// SetFilter shows the list under f. keepPlace: f selects what the
		// filter in force did (only the typing differs), so the cursor
		// stays.
		SetFilter(m Model, f filter, keepPlace bool) Model
		// Len is how many rows the list shows.
		Len(m Model) int
		// Validate says why sel selects nothing on this screen.
		Validate(f filter) error
	}
	// ticking is a screen whose rows show countdowns: Urgent reports
	// whether one on screen shows tenths, so the clock ticks every 100 ms.
	ticking interface {
		Urgent(m Model, rows int) bool
	}
	// statusful is a screen with a quiet status line of its own (the
	// home view's order), shown when nothing more pressing is.
	statusful interface {
		Status(m Model) string
	}
)

// views holds one component per screen; the list screens first, in tab
// order, then those opened from a list.
type views struct {
	attempts    attemptsScreen
	dead        deadLettersScreen
	workflows   workflowsScreen
	audit       auditScreen
	operations  operationsScreen
	queues      queuesScreen
	stats       statsScreen
	detail      detailScreen
	timeline    timelineScreen
	auditRecord auditRecordScreen
	operation   operationScreen
	queue       queueScreen
}

// get is the component of screen s.
func (v views) get(s screen) component {
	switch s {
	case screenAttempts:
		return v.attempts
	case screenDeadLetters:
		return v.dead
	case screenWorkflows:
		return v.workflows
	case screenAudit:
		return v.audit
	case screenOperations:
		return v.operations
	case screenQueues:
		return v.queues
	case screenStats:
		return v.stats
	case screenDetail:
		return v.detail
	case screenTimeline:
		return v.timeline
	case screenAuditRecord:
		return v.auditRecord
	case screenOperation:
		return v.operation
	case screenQueue:
		return v.queue
	}
	return nil
}

// active is the component on screen.
func (m Model) active() component { return m.views.get(m.screen) }

// list is the place of a list screen: the row under the cursor and the
// first row shown.
type list struct {
	cursor int
	offset int
}

// clamp keeps the cursor inside n rows and within rows of the top.
func (l list) clamp(n, rows int) list {
	l.cursor = min(max(l.cursor, 0), max(n-1, 0))
	if l.cursor < l.offset {
		l.offset = l.cursor
	}
	if l.cursor >= l.offset+rows {
		l.offset = l.cursor - rows + 1
	}
	l.offset = min(max(l.offset, 0), max(n-rows, 0))
	return l
}

// navDelta is how far a navigation key moves a cursor or a scroll with a
// page of page rows; ok is false for any other key.
func navDelta(k KeyMap, msg tea.KeyMsg, page int) (delta int, ok bool) {
	switch {
	case key.Matches(msg, k.Up):
		return -1, true
	case key.Matches(msg, k.Down):
		return 1, true
	case key.Matches(msg, k.PageUp):
		return -page, true
	case key.Matches(msg, k.PageDown):
		return page, true
	case key.Matches(msg, k.Top):
		return -1 << 30, true
	case key.Matches(msg, k.Bottom):
		return 1 << 30, true
	}
	return 0, false
}

// moveList moves l by a navigation key over n rows, the page being the
// body's rows; ok is false for any other key.
func (m Model) moveList(l list, msg tea.KeyMsg, n int) (list, bool) {
	rows := m.bodyRows()
	d, ok := navDelta(m.keys, msg, rows)
	if !ok {
		return l, false
	}
	l.cursor += d
	return l.clamp(n, rows), true
}

// scrollBy moves a scroll by a navigation key; ok is false for any other
// key. The view keeps it within what it draws.
func (m Model) scrollBy(scroll int, msg tea.KeyMsg) (int, bool) {
	d, ok := navDelta(m.keys, msg, m.bodyRows())
	if !ok {
		return scroll, false
	}
	return max(scroll+d, 0), true
}

// goBack leaves a screen opened from a list for the list under it.
func (m Model) goBack() Model {
	m.screen = m.back
	return m
}

// openFrom shows screen s over the current list (or over the list under
// the current screen), so esc comes back to it.
func (m Model) openFrom(s screen) Model {
	if m.screen.isList() {
		m.back = m.screen
	}
	m.screen = s
	return m
}

// tabCount is a tab's count: " (1,234)".
func tabCount(n int) string { return " (" + thousands(n) + ")" }

// copyID copies raw to the clipboard and says what it copied.
func (m Model) copyID(raw, shown string) (Model, tea.Cmd) {
	return m.say("copied " + shown), copyCmd(m.p.Clipboard, raw)
}
