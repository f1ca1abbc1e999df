package tui

import (
	"fmt"
	"strings"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

var deadColumns = []column{
	{title: "WORKFLOW", min: 12, grow: 2},
	{title: "ACTIVITY", min: 14, grow: 2},
	{title: "TRIES", min: 5},
	{title: "FAILURE", min: 20, grow: 5},
	{title: "DEAD FOR", min: 10},
	{title: "REDRIVES", min: 8, drop: 1},
}

var groupColumns = []column{
	{title: "FAILURE TYPE", min: 16, grow: 2},
	{title: "COUNT", min: 7},
	{title: "FIRST SEEN", min: 12},
	{title: "LAST SEEN", min: 12},
	{title: "LATEST MESSAGE", min: 10, grow: 3, drop: 1},
}

func (m Model) deadCells(a *durablev1.PendingActivity) []cell {
	st := m.styles
	return []cell{
		{text: activity.EscapeID(a.GetWorkflowId())},
		{text: activity.EscapeID(a.GetActivityId()) + " " + activity.EscapeID(a.GetActivityType())},
		{text: fmt.Sprintf("%d/%d", a.GetAttempt(), a.GetMaxAttempts())},
		{text: failureLine(a.GetLastFailure()), style: &st.Failed},
		{text: age(m.now, a.GetDeadLetteredTime()), style: &st.Muted},
		{text: fmt.Sprint(a.GetRedrives()), style: &st.Muted},
	}
}

func (m Model) groupCells(g *failureGroup) []cell {
	st := m.styles
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
	if m.grouped {
		shown, widths := layout(groupColumns, m.width)
		l := m.groupList
		lines := []string{renderHeader(m.styles, groupColumns, shown, widths)}
		end := min(l.offset+h-1, len(m.st.dead.groupOrder))
		for i := l.offset; i < end; i++ {
			lines = append(lines, renderRow(m.styles, m.groupCells(m.st.dead.groupOrder[i]), shown, widths, i == l.cursor))
		}
		return strings.Join(lines, "\n")
	}
	shown, widths := layout(deadColumns, m.width)
	l := m.lists[screenDeadLetters]
	lines := []string{renderHeader(m.styles, deadColumns, shown, widths)}
	for i, a := range m.st.dead.set.Window(l.offset, h-1) {
		lines = append(lines, renderRow(m.styles, m.deadCells(a), shown, widths, l.offset+i == l.cursor))
	}
	return strings.Join(lines, "\n")
}
