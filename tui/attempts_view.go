package tui

import (
	"fmt"
	"strings"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

var attemptColumns = []column{
	{title: "WORKFLOW", min: 12, grow: 2},
	{title: "ACTIVITY", min: 14, grow: 2},
	{title: "STATE", min: 13},
	{title: "TRY", min: 5},
	{title: "NEXT", min: 7},
	{title: "WAITING ON", min: 17},
	{title: "LAST FAILURE", min: 16, grow: 4, drop: 1},
	{title: "HEARTBEAT", min: 10, drop: 2},
	{title: "PROGRESS", min: 10, grow: 2, drop: 3},
}

func isDead(a *durablev1.PendingActivity) bool {
	return a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
}

func (m Model) attemptCells(a *durablev1.PendingActivity) []cell {
	st := m.styles
	w := waitOf(a, m.now)
	stateStyle := st.state(a.GetState())
	var cdStyle, whyStyle = &st.Row, &st.Muted
	if w.stuck {
		cdStyle, whyStyle = &st.Warning, &st.Warning
	}
	return []cell{
		{text: activity.EscapeID(a.GetWorkflowId())},
		{text: activity.EscapeID(a.GetActivityId()) + " " + activity.EscapeID(a.GetActivityType())},
		{text: stateName(a.GetState()), style: &stateStyle},
		{text: fmt.Sprintf("%d/%d", a.GetAttempt(), a.GetMaxAttempts())},
		{text: w.countdown, style: cdStyle},
		{text: w.reason, style: whyStyle},
		{text: failureLine(a.GetLastFailure()), style: &st.Failed},
		{text: age(m.now, a.GetLastHeartbeatTime()), style: &st.Muted},
		{text: preview(a.GetHeartbeatDetails()), style: &st.Muted},
	}
}

// attemptsView renders only the rows on screen, whatever the total.
func (m Model) attemptsView(h int) string {
	if m.st.attempts.set.Len() == 0 {
		return m.emptyView("no pending activities")
	}
	shown, widths := layout(attemptColumns, m.width)
	l := m.lists[screenAttempts]
	lines := []string{renderHeader(m.styles, attemptColumns, shown, widths)}
	for i, a := range m.st.attempts.set.Window(l.offset, h-1) {
		lines = append(lines, renderRow(m.styles, m.attemptCells(a), shown, widths, l.offset+i == l.cursor))
	}
	return strings.Join(lines, "\n")
}

func (m Model) emptyView(what string) string {
	if !m.conn.synced {
		return ""
	}
	if m.filterText() != "" {
		what += " match the filter"
	}
	return "\n  " + m.styles.Muted.Render(what)
}
