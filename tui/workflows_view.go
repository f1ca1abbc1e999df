package tui

import (
	"fmt"
	"strings"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

var workflowColumns = []column{
	{title: "WORKFLOW", min: 14, grow: 3},
	{title: "TYPE", min: 12, grow: 1},
	{title: "STATUS", min: 9},
	{title: "PENDING", min: 7},
	{title: "DEAD", min: 4},
	{title: "STARTED", min: 11},
	{title: "OUTCOME", min: 12, grow: 3, drop: 1},
}

func (m Model) workflowCells(w *durablev1.WorkflowInfo) []cell {
	st := m.styles
	status := st.status(w.GetStatus())
	dead := fmt.Sprint(w.GetDeadLetters())
	deadStyle := &st.Muted
	if w.GetDeadLetters() > 0 {
		deadStyle = &st.Dead
	}
	outcome := ""
	switch w.GetStatus() {
	case durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED:
		outcome = "after " + span(w.GetCloseTime().AsTime().Sub(w.GetStartTime().AsTime())) + ": " + preview(w.GetResult())
	case durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED:
		outcome = failureLine(w.GetFailure())
	}
	statusText := statusName(w.GetStatus())
	if m.st.wfTasks.rows[w.GetWorkflowId()] != nil {
		// Running in name only: its workflow task waits on a queue
		// nobody polls (the home view has its row).
		statusText, status = "stalled", st.Warning
	}
	return []cell{
		{text: activity.EscapeID(w.GetWorkflowId())},
		{text: activity.EscapeID(w.GetWorkflowType())},
		{text: statusText, style: &status},
		{text: fmt.Sprint(w.GetPendingActivities())},
		{text: dead, style: deadStyle},
		{text: age(m.now, w.GetStartTime()), style: &st.Muted},
		{text: outcome, style: &st.Muted},
	}
}

func (m Model) workflowsView(h int) string {
	if m.st.workflows.Len() == 0 {
		return m.emptyView("no workflows")
	}
	shown, widths := layout(workflowColumns, m.width)
	l := m.lists[screenWorkflows]
	lines := []string{renderHeader(m.styles, workflowColumns, shown, widths)}
	for i, w := range m.st.workflows.Window(l.offset, h-1) {
		lines = append(lines, renderRow(m.styles, m.workflowCells(w), shown, widths, l.offset+i == l.cursor))
	}
	return strings.Join(lines, "\n")
}
