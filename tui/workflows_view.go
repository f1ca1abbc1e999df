package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

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

// workflowsScreen lists the workflows; enter opens one's timeline.
type workflowsScreen struct{ list }

// Tab is "workflows" and how many the daemon keeps.
func (c workflowsScreen) Tab(m Model) (name, count string) {
	return "workflows", tabCount(len(m.st.wfs))
}

// Help lists the workflows view's keys.
func (c workflowsScreen) Help(k KeyMap) (short, full []key.Binding) {
	return []key.Binding{k.Open, k.Filter}, []key.Binding{k.Open, k.Copy, k.Filter}
}

// SetSize keeps the cursor on a row and the row on screen.
func (c workflowsScreen) SetSize(m Model, rows int) Model {
	m.views.workflows.list = c.list.clamp(m.st.workflows.Len(), rows)
	return m
}

// Update answers the workflows view's keys.
func (c workflowsScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	if l, ok := m.moveList(c.list, msg, m.st.workflows.Len()); ok {
		m.views.workflows.list = l
		return m, nil, true
	}
	w := c.selected(m)
	switch {
	case w == nil:
		return m, nil, false
	case key.Matches(msg, m.keys.Open), key.Matches(msg, m.keys.Timeline):
		m, cmd := m.openTimeline(w.GetWorkflowId())
		return m, cmd, true
	case key.Matches(msg, m.keys.Copy):
		m, cmd := m.copyID(w.GetWorkflowId(), activity.EscapeID(w.GetWorkflowId()))
		return m, cmd, true
	}
	return m, nil, false
}

// selected is the workflow under the cursor, nil on an empty list.
func (c workflowsScreen) selected(m Model) *durablev1.WorkflowInfo {
	if c.cursor >= m.st.workflows.Len() {
		return nil
	}
	return m.st.workflows.At(c.cursor)
}

// View is the workflows on screen.
func (c workflowsScreen) View(m Model, h int) string {
	if m.st.workflows.Len() == 0 {
		return m.emptyView("no workflows")
	}
	shown, widths := layout(workflowColumns, m.width)
	lines := []string{renderHeader(m.styles, workflowColumns, shown, widths)}
	for i, w := range m.st.workflows.Window(c.offset, h-1) {
		lines = append(lines, renderRow(m.styles, m.workflowCells(w), shown, widths, c.offset+i == c.cursor))
	}
	return strings.Join(lines, "\n")
}

// Filter is the workflows view's filter.
func (c workflowsScreen) Filter(m Model) filter { return m.st.wfFilter }

// SetFilter lists the workflows f selects.
func (c workflowsScreen) SetFilter(m Model, f filter, keepPlace bool) Model {
	if keepPlace {
		m.st.wfFilter.text = f.text
		return m
	}
	m.st.refilterWorkflows(f)
	m.views.workflows.list = list{}
	return m.clamp(screenWorkflows)
}

// Len is how many workflows the view shows.
func (c workflowsScreen) Len(m Model) int { return m.st.workflows.Len() }

// Validate says why a word selects no workflow.
func (c workflowsScreen) Validate(f filter) error { return f.sel.ForWorkflows() }
