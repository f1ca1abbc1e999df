package tui

import (
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// deadColumns give the failure every spare cell before the ids, whose
// ends stay ("order-…-0991").
var deadColumns = []column{
	{title: "WORKFLOW", min: 12, prio: 2, mid: true},
	{title: "ACTIVITY", min: 12, prio: 2},
	{title: "TRIES", min: 5},
	{title: "FAILURE", min: 20, keep: 40},
	{title: "DEAD FOR", min: 9, prio: 1},
	{title: "REDRIVES", min: 8, prio: 1, drop: 1},
}

// groupColumns: one line per outage, its latest message as wide as it can
// be once the type and counts are whole.
var groupColumns = []column{
	{title: "FAILURE TYPE", min: 16},
	{title: "COUNT", min: 7},
	{title: "FIRST SEEN", min: 12, prio: 1},
	{title: "LAST SEEN", min: 12, prio: 1},
	{title: "LATEST MESSAGE", min: 10, prio: 2, drop: 1},
}

func (m Model) deadCells(st *Styles, a *durablev1.PendingActivity) []cell {
	return []cell{
		{text: activity.EscapeID(a.GetWorkflowId())},
		{text: activity.EscapeID(a.GetActivityId()) + " " + activity.EscapeID(a.GetActivityType())},
		{text: fmt.Sprintf("%d/%d", a.GetAttempt(), a.GetMaxAttempts())},
		{text: failureLine(a.GetLastFailure()), style: &st.Failed},
		{text: age(m.now, a.GetDeadLetteredTime()), style: &st.Muted},
		{text: fmt.Sprint(a.GetRedrives()), style: &st.Muted},
	}
}

// printColumns: one line per fingerprint, the message as the fingerprint
// reads it (placeholders for what varies), as wf dlq list --group shows it.
var printColumns = []column{
	{title: "FINGERPRINT", min: 12, drop: 2},
	{title: "FAILURE TYPE", min: 16},
	{title: "COUNT", min: 7},
	{title: "FIRST SEEN", min: 12, prio: 1, drop: 1},
	{title: "LAST SEEN", min: 12, prio: 1},
	{title: "MESSAGE", min: 10, prio: 0, keep: 30},
}

func (m Model) printCells(st *Styles, g *failureGroup) []cell {
	latest := g.members.At(0)
	return []cell{
		{text: g.key, style: &st.Muted},
		{text: activity.EscapeID(g.typ), style: &st.Failed},
		{text: thousands(g.count())},
		{text: span(m.now.Sub(g.firstSeen())) + " ago", style: &st.Muted},
		{text: span(m.now.Sub(g.lastSeen())) + " ago", style: &st.Muted},
		{text: oneLine(activity.NormalizedMessage(latest.GetLastFailure()))},
	}
}

func (m Model) groupCells(st *Styles, g *failureGroup) []cell {
	latest := g.members.At(0)
	return []cell{
		{text: activity.EscapeID(g.typ), style: &st.Failed},
		{text: thousands(g.count())},
		{text: span(m.now.Sub(g.firstSeen())) + " ago", style: &st.Muted},
		{text: span(m.now.Sub(g.lastSeen())) + " ago", style: &st.Muted},
		{text: oneLine(latest.GetLastFailure().GetMessage()), style: &st.Muted},
	}
}

// deadLettersScreen is the dead-letter queue: every letter, or with g one
// line per failure type.
type deadLettersScreen struct {
	list
	// grouped: one row per failure type; groups is that list's place.
	grouped bool
	groups  list
}

// Tab is "dead letters" and how many there are.
func (c deadLettersScreen) Tab(m Model) (name, count string) {
	return "dead letters", tabCount(m.st.deadTotal)
}

// Help lists the dead-letter view's keys.
func (c deadLettersScreen) Help(k KeyMap) (short, full []key.Binding) {
	return []key.Binding{k.Redrive, k.RedriveAll, k.Group, k.Open, k.Filter},
		[]key.Binding{k.Redrive, k.RedriveAll, k.withReason(), k.CancelOp, k.Group, k.Open, k.Timeline, k.Copy, k.Filter}
}

// SetSize keeps both places (letters and groups) valid.
func (c deadLettersScreen) SetSize(m Model, rows int) Model {
	c.list = c.list.clamp(m.st.dead.set.Len(), rows)
	c.groups = c.groups.clamp(len(m.st.dead.groupOrder), rows)
	m.views.dead = c
	return m
}

// Update answers the dead-letter view's keys.
func (c deadLettersScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	k := m.keys
	if c.grouped {
		if l, ok := m.moveList(c.groups, msg, len(m.st.dead.groupOrder)); ok {
			m.views.dead.groups = l
			return m, nil, true
		}
	} else if l, ok := m.moveList(c.list, msg, m.st.dead.set.Len()); ok {
		m.views.dead.list = l
		return m, nil, true
	}
	switch {
	case key.Matches(msg, k.Group):
		// g goes round: by failure type, by fingerprint, ungrouped.
		switch {
		case !c.grouped:
			m.views.dead.grouped = true
			if m.st.dead.byPrint {
				m.st.groupDeadBy(false)
			}
		case !m.st.dead.byPrint:
			m.st.groupDeadBy(true)
		default:
			m.views.dead.grouped = false
		}
		m.views.dead.groups = list{}
		return m.clampAll(), nil, true
	case key.Matches(msg, k.Back) && c.grouped && m.filterText() == "":
		// esc clears the filter first (the console's own esc), then the
		// grouping.
		m.views.dead.grouped = false
		return m.clampAll(), nil, true
	}
	if g := c.selectedGroup(m); g != nil {
		switch {
		case key.Matches(msg, k.Open):
			return m.openGroup(g), nil, true
		case key.Matches(msg, k.Redrive), key.Matches(msg, k.RedriveAll):
			return m.askGroup(g), nil, true
		}
		return m, nil, false
	}
	if key.Matches(msg, k.RedriveAll) {
		set := m.st.dead.set
		refs := make([]ref, 0, set.Len())
		for i := 0; i < set.Len(); i++ {
			refs = append(refs, refOf(set.At(i)))
		}
		return m.askSelection(refs, m.st.dead.filter.sel), nil, true
	}
	a := c.selected(m)
	switch {
	case a == nil:
		return m, nil, false
	case key.Matches(msg, k.Redrive):
		return m.askRedriveOf(a), nil, true
	case key.Matches(msg, k.Open):
		m, cmd := m.openActivity(a)
		return m, cmd, true
	case key.Matches(msg, k.Timeline):
		m, cmd := m.openTimeline(a.GetWorkflowId())
		return m, cmd, true
	case key.Matches(msg, k.Copy):
		m, cmd := m.copyID(activityRef(a.GetWorkflowId(), a.GetActivityId()))
		return m, cmd, true
	}
	return m, nil, false
}

// selected is the letter under the cursor; nil when grouped.
func (c deadLettersScreen) selected(m Model) *durablev1.PendingActivity {
	if c.grouped || c.cursor >= m.st.dead.set.Len() {
		return nil
	}
	return m.st.dead.set.At(c.cursor)
}

// selectedGroup is the group under the cursor; nil when not grouped.
func (c deadLettersScreen) selectedGroup(m Model) *failureGroup {
	if !c.grouped || c.groups.cursor >= len(m.st.dead.groupOrder) {
		return nil
	}
	return m.st.dead.groupOrder[c.groups.cursor]
}

// View is the letters on screen, or the groups.
func (c deadLettersScreen) View(m Model, h int) string {
	if m.st.dead.set.Len() == 0 {
		return m.emptyView("no dead letters")
	}
	st := m.styles // one copy for every row's style pointers
	if c.grouped {
		l := c.groups
		end := min(l.offset+h-1, len(m.st.dead.groupOrder))
		cols, cells := groupColumns, m.groupCells
		if m.st.dead.byPrint {
			cols, cells = printColumns, m.printCells
		}
		var rows [][]cell
		for i := l.offset; i < end; i++ {
			rows = append(rows, cells(&st, m.st.dead.groupOrder[i]))
		}
		return renderTable(m.styles, cols, rows, m.width, l.cursor-l.offset)
	}
	l := c.list
	window := m.st.dead.set.Window(l.offset, h-1)
	rows := make([][]cell, len(window))
	for i, a := range window {
		rows[i] = m.deadCells(&st, a)
	}
	return renderTable(m.styles, deadColumns, rows, m.width, l.cursor-l.offset)
}

// Filter is the dead-letter view's filter.
func (c deadLettersScreen) Filter(m Model) filter { return m.st.dead.filter }

// SetFilter lists the letters f selects.
func (c deadLettersScreen) SetFilter(m Model, f filter, keepPlace bool) Model {
	if keepPlace {
		m.st.dead.filter.text = f.text
		return m
	}
	m.st.refilterActivities(true, f)
	m.views.dead.list, m.views.dead.groups = list{}, list{}
	return m.clamp(screenDeadLetters)
}

// Len is how many rows the view shows: letters, or groups.
func (c deadLettersScreen) Len(m Model) int {
	if c.grouped {
		return len(m.st.dead.groupOrder)
	}
	return m.st.dead.set.Len()
}

// Status names the grouping in force and what g does next.
func (c deadLettersScreen) Status(m Model) string {
	switch {
	case !c.grouped:
		return ""
	case m.st.dead.byPrint:
		return m.styles.Muted.Render("grouped by fingerprint: type and message, numbers and ids aside · g ungroups")
	}
	return m.styles.Muted.Render("grouped by failure type · g groups by fingerprint")
}

// Validate says why a word selects no letter.
func (c deadLettersScreen) Validate(f filter) error { return f.sel.ForDeadLetters() }

// noFailureType is the group of letters whose failure has no type: no
// words select it, so it opens and redrives by its members alone.
const noFailureType = "(no failure type)"

// groupSelection is the selection that shows exactly a group's letters: the
// filter in force and the group's failure type, matched exactly (a group of
// Timeout never takes in HeartbeatTimeout), or its fingerprint.
func (m Model) groupSelection(g *failureGroup) (client.Selection, bool) {
	sel := m.st.dead.filter.sel
	switch {
	case g.byPrint():
		sel.Fingerprint = g.key
	case g.typ == noFailureType:
		return client.Selection{}, false
	default:
		sel.FailureType = g.typ
	}
	return sel, true
}

// openGroup shows a group's letters as the list under the group's exact
// selection, so what R then redrives is the group and nothing else.
func (m Model) openGroup(g *failureGroup) Model {
	sel, ok := m.groupSelection(g)
	if !ok {
		return m.say("letters without a failure type have no words to select them: press R on the group")
	}
	if _, err := parseFilter(sel.String(), m.views.dead); err != nil {
		// A failure type no word can spell (one ending in *).
		return m.say("no words select this group (" + err.Error() + "): press R on the group")
	}
	m.views.dead.grouped = false
	m.input.SetValue(sel.String())
	return m.setFilter(sel.String())
}

// askGroup asks to redrive every letter of a group.
func (m Model) askGroup(g *failureGroup) Model {
	refs := make([]ref, 0, g.count())
	for i := 0; i < g.members.Len(); i++ {
		refs = append(refs, refOf(g.members.At(i)))
	}
	sel, ok := m.groupSelection(g)
	if !ok {
		return m.askRedrive(refs, "every dead letter whose failure has no type", true)
	}
	return m.askSelection(refs, sel)
}
