package tui

import (
	"fmt"

	"github.com/tinyllm/durable/activity"
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
