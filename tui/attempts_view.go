package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

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

// attemptsScreen is the home view: every pending activity, and each
// workflow task stalled on a queue nobody polls, the most urgent first.
type attemptsScreen struct{ list }

// Tab is "attempts" and how many activities are pending.
func (c attemptsScreen) Tab(m Model) (name, count string) {
	return "attempts", tabCount(len(m.st.acts))
}

// Help lists the home view's keys.
func (c attemptsScreen) Help(k KeyMap) (short, full []key.Binding) {
	return []key.Binding{k.NextStuck, k.Sort, k.Open, k.Filter},
		[]key.Binding{k.NextStuck, k.Sort, k.HideDead, k.Open, k.Timeline, k.Copy, k.Filter}
}

// SetSize keeps the cursor on a row and the row on screen.
func (c attemptsScreen) SetSize(m Model, rows int) Model {
	m.views.attempts.list = c.list.clamp(m.st.attempts.set.Len(), rows)
	return m
}

// Update answers the home view's keys.
func (c attemptsScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	if l, ok := m.moveList(c.list, msg, m.st.attempts.set.Len()); ok {
		m.views.attempts.list = l
		return m, nil, true
	}
	k, a := m.keys, c.selected(m)
	switch {
	case key.Matches(msg, k.Sort):
		return m.cycleSort(), nil, true
	case key.Matches(msg, k.NextStuck):
		return m.nextStuck(), nil, true
	case key.Matches(msg, k.HideDead):
		return m.toggleDead(), nil, true
	case a == nil:
		return m, nil, false
	case key.Matches(msg, k.Open):
		m, cmd := m.openActivity(a)
		return m, cmd, true
	case key.Matches(msg, k.Timeline):
		m, cmd := m.openTimeline(a.GetWorkflowId())
		return m, cmd, true
	case key.Matches(msg, k.Copy) && isWorkflowTask(a):
		m, cmd := m.copyID(a.GetWorkflowId(), activity.EscapeID(a.GetWorkflowId()))
		return m, cmd, true
	case key.Matches(msg, k.Copy):
		m, cmd := m.copyID(activityRef(a.GetWorkflowId(), a.GetActivityId()))
		return m, cmd, true
	}
	return m, nil, false
}

// selected is the row under the cursor, nil on an empty list.
func (c attemptsScreen) selected(m Model) *durablev1.PendingActivity {
	if c.cursor >= m.st.attempts.set.Len() {
		return nil
	}
	return m.st.attempts.set.At(c.cursor)
}

// View renders only the rows on screen, whatever the total.
func (c attemptsScreen) View(m Model, h int) string {
	if m.st.attempts.set.Len() == 0 {
		return m.emptyView("no pending activities")
	}
	window := m.st.attempts.set.Window(c.offset, h-1)
	rows := make([][]cell, len(window))
	st := m.styles
	for i, a := range window {
		rows[i] = m.attemptCells(&st, a)
	}
	return renderTable(m.styles, attemptColumns, rows, m.width, c.cursor-c.offset)
}

// Filter is the home view's filter.
func (c attemptsScreen) Filter(m Model) filter { return m.st.attempts.filter }

// SetFilter lists the pending activities f selects.
func (c attemptsScreen) SetFilter(m Model, f filter, keepPlace bool) Model {
	if keepPlace {
		m.st.attempts.filter.text = f.text
		return m
	}
	m.st.refilterActivities(false, f)
	m.views.attempts.list = list{}
	return m.clamp(screenAttempts)
}

// Len is how many rows the home view has.
func (c attemptsScreen) Len(m Model) int { return m.st.attempts.set.Len() }

// Validate: every word selects pending activities.
func (c attemptsScreen) Validate(filter) error { return nil }

// Urgent reports whether a countdown on screen shows tenths.
func (c attemptsScreen) Urgent(m Model, rows int) bool {
	for _, a := range m.st.attempts.set.Window(c.offset, rows) {
		if waitOf(a, m.now).urgent {
			return true
		}
	}
	return false
}

// Status is the home view's order, and for a stalled workflow task under
// the cursor, what it waits on in full (its row may have to cut it).
func (c attemptsScreen) Status(m Model) string {
	st := m.styles
	if a := c.selected(m); a != nil && isWorkflowTask(a) {
		if w, ok := m.st.workflowTaskWait(a.GetWorkflowId()); ok {
			return st.Warning.Render(w.String(m.now)+" · enter: its queue") + st.Muted.Render(" · "+m.homeStatus())
		}
	}
	return st.Muted.Render(m.homeStatus())
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
