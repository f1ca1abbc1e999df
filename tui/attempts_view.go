package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// attemptColumns give the cause its width first: the failure and the
// heartbeat share what is spare (prio 0, capped until the others have had
// what they need), then the state and the wait reason, ids last. At 80
// columns the heartbeat and then the wait reason go, never the failure.
var attemptColumns = []column{
	{title: "WORKFLOW", min: 12, prio: 2, mid: true},
	{title: "ACTIVITY", min: 12, prio: 2},
	{title: "STATE", min: 9, prio: 1},
	{title: "TRY", min: 5},
	{title: "NEXT", min: 13},
	{title: "WAITING ON", min: 17, prio: 1, drop: 1},
	{title: "LAST FAILURE", min: 20, max: 40, keep: 32},
	{title: "HEARTBEAT", min: 16, max: 24, drop: 2},
}

func isDead(a *durablev1.PendingActivity) bool {
	return a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
}

// attemptCells is one row; st is shared by every row of a render, so that
// the cells' style pointers cost one copy of the styles, not one a row.
func (m Model) attemptCells(st *Styles, a *durablev1.PendingActivity) []cell {
	if isWorkflowTask(a) {
		return m.workflowTaskCells(st, a)
	}
	w := waitOf(a, m.now)
	stateStyle := st.state(a.GetState())
	var cdStyle, whyStyle = &st.Row, &st.Muted
	if w.stuck {
		cdStyle, whyStyle = &st.Warning, &st.Warning
	}
	return []cell{
		{text: activity.EscapeID(a.GetWorkflowId())},
		{text: activity.EscapeID(a.GetActivityId()) + " " + activity.EscapeID(a.GetActivityType())},
		{text: stateName(a.GetState()), short: shortStateName(a.GetState()), style: &stateStyle},
		{text: fmt.Sprintf("%d/%d", a.GetAttempt(), a.GetMaxAttempts())},
		{text: w.countdown, style: cdStyle},
		{text: w.reason, short: w.shortReason(), style: whyStyle},
		{text: failureLine(a.GetLastFailure()), style: &st.Failed},
		{text: heartbeatLine(m.now, a), style: &st.Muted},
	}
}

// workflowTaskCells is the row of a stalled workflow task: what it waits
// on takes the failure's column, the one kept at every width.
func (m Model) workflowTaskCells(st *Styles, a *durablev1.PendingActivity) []cell {
	w := waitOf(a, m.now)
	why := "workflow task waiting on queue " + activity.EscapeID(a.GetTaskQueue())
	short := ""
	if wait, ok := m.st.workflowTaskWait(a.GetWorkflowId()); ok {
		why = wait.String(m.now)
		short = "queue " + activity.EscapeID(wait.Queue) + ", no poller"
	}
	return []cell{
		{text: activity.EscapeID(a.GetWorkflowId())},
		{text: "workflow task", short: "wf task"},
		{text: "stalled", style: &st.Warning},
		{text: fmt.Sprint(a.GetAttempt())},
		{text: w.countdown, style: &st.Warning},
		{text: w.reason, short: w.shortReason(), style: &st.Warning},
		{text: why, short: short, style: &st.Warning},
		{},
	}
}

// heartbeatLine is the last heartbeat's age and what it reported:
// "1.5s ago file=part-0003 offset=1048576".
func heartbeatLine(now time.Time, a *durablev1.PendingActivity) string {
	return strings.TrimSpace(age(now, a.GetLastHeartbeatTime()) + " " + activity.SummarizeDetails(a.GetHeartbeatDetails()))
}

// attemptsView renders only the rows on screen, whatever the total.
func (m Model) attemptsView(h int) string {
	if m.st.attempts.set.Len() == 0 {
		return m.emptyView("no pending activities")
	}
	l := m.lists[screenAttempts]
	window := m.st.attempts.set.Window(l.offset, h-1)
	rows := make([][]cell, len(window))
	st := m.styles
	for i, a := range window {
		rows[i] = m.attemptCells(&st, a)
	}
	return renderTable(m.styles, attemptColumns, rows, m.width, l.cursor-l.offset)
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
