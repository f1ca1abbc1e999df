package tui

import (
	"fmt"

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

func (m Model) deadLettersView(h int) string {
	if m.st.dead.set.Len() == 0 {
		return m.emptyView("no dead letters")
	}
	st := m.styles // one copy for every row's style pointers
	if m.grouped {
		l := m.groupList
		end := min(l.offset+h-1, len(m.st.dead.groupOrder))
		var rows [][]cell
		for i := l.offset; i < end; i++ {
			rows = append(rows, m.groupCells(&st, m.st.dead.groupOrder[i]))
		}
		return renderTable(m.styles, groupColumns, rows, m.width, l.cursor-l.offset)
	}
	l := m.lists[screenDeadLetters]
	window := m.st.dead.set.Window(l.offset, h-1)
	rows := make([][]cell, len(window))
	for i, a := range window {
		rows[i] = m.deadCells(&st, a)
	}
	return renderTable(m.styles, deadColumns, rows, m.width, l.cursor-l.offset)
}

// noFailureType is the group of letters whose failure has no type: no
// words select it, so it opens and redrives by its members alone.
const noFailureType = "(no failure type)"

// groupSelection is the selection that shows exactly a group's letters: the
// filter in force and the group's failure type, matched exactly (a group of
// Timeout never takes in HeartbeatTimeout).
func (m Model) groupSelection(g *failureGroup) (client.Selection, bool) {
	if g.typ == noFailureType {
		return client.Selection{}, false
	}
	sel := m.st.dead.filter.sel
	sel.FailureType = g.typ
	return sel, true
}

// openGroup shows a group's letters as the list under the group's exact
// selection, so what R then redrives is the group and nothing else.
func (m Model) openGroup(g *failureGroup) Model {
	sel, ok := m.groupSelection(g)
	if !ok {
		return m.say("letters without a failure type have no words to select them: press R on the group")
	}
	if _, err := parseFilter(sel.String(), screenDeadLetters); err != nil {
		// A failure type no word can spell (one ending in *).
		return m.say("no words select this group (" + err.Error() + "): press R on the group")
	}
	m.grouped = false
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
