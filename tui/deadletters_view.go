package tui

import (
	"fmt"
	"strings"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
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
