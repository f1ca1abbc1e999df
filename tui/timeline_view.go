package tui

import (
	"fmt"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"strings"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// timelineScreen is a workflow's history, read again as the stream says
// the workflow changed.
type timelineScreen struct{ timeline }

// Help lists the timeline's keys.
func (c timelineScreen) Help(k KeyMap) (short, full []key.Binding) {
	short = []key.Binding{k.Back, k.Up, k.Down}
	return short, append(append([]key.Binding{}, short...), k.Copy)
}

// SetSize keeps the scroll within the events, for a body of rows table
// rows (see timelineRows).
func (c timelineScreen) SetSize(m Model, rows int) Model {
	t := &m.views.timeline
	t.scroll = min(t.scroll, maxScroll(len(t.events), max(rows+1-timelineHead, 1)))
	return m
}

// Update scrolls, copies the workflow id, and esc goes back to where the
// timeline was opened from.
func (c timelineScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	switch {
	case key.Matches(msg, m.keys.Back):
		m.screen = c.from
		return m, nil, true
	case key.Matches(msg, m.keys.Copy):
		m, cmd := m.copyID(c.workflowID, activity.EscapeID(c.workflowID))
		return m, cmd, true
	}
	if d, ok := navDelta(m.keys, msg, m.bodyRows()); ok {
		return m.scrollTimeline(d), nil, true
	}
	return m, nil, false
}

// View is the history, one event a line, timed from the start.
func (c timelineScreen) View(m Model, h int) string {
	st := m.styles
	t := c.timeline
	title := "workflow " + activity.EscapeID(t.workflowID)
	if w, ok := m.st.wfs[t.workflowID]; ok {
		title += fmt.Sprintf(" · %s · %s", activity.EscapeID(w.GetWorkflowType()), statusName(w.GetStatus()))
	}
	if t.refreshErr != "" {
		title += st.Warning.Render(" · read again failed: " + t.refreshErr)
	}
	lines := []string{st.Title.Render(title), ""}
	switch {
	case t.loading:
		lines = append(lines, st.Muted.Render("  loading history…"))
	case t.err != "":
		lines = append(lines, st.Warning.Render("  "+t.err))
	case len(t.events) == 0:
		lines = append(lines, st.Muted.Render("  no events"))
	default:
		origin := t.events[0].GetTime().AsTime()
		lines = append(lines, st.Header.Render(fmt.Sprintf("  %-9s %-4s %-26s %s", "TIME", "#", "EVENT", "DETAIL")))
		rows := h - timelineHead
		from := min(t.scroll, max(len(t.events)-rows, 0))
		for _, e := range t.events[from:min(from+rows, len(t.events))] {
			lines = append(lines, "  "+eventLine(e, origin))
		}
	}
	return strings.Join(lines, "\n")
}

// eventLine is "+1m02s    7    ActivityTaskStarted        activity 2 attempt 1 by w-1".
func eventLine(e *durablev1.HistoryEvent, origin time.Time) string {
	line := fmt.Sprintf("%-9s %-4d %-26s %s", "+"+span(e.GetTime().AsTime().Sub(origin)), e.GetEventId(), eventName(e.GetType()), eventDetail(e))
	return strings.TrimRight(line, " ")
}

func eventDetail(e *durablev1.HistoryEvent) string {
	act := "activity " + activity.EscapeID(e.GetActivityId())
	switch e.GetType() {
	case durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		return fmt.Sprintf("%s on %s %s", activity.EscapeID(e.GetWorkflowType()), activity.EscapeID(e.GetTaskQueue()), preview(e.GetInput()))
	case durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
		return "result " + preview(e.GetResult())
	case durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_FAILED, durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED:
		return failureLine(e.GetFailure())
	case durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED, durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
		return activity.EscapeID(e.GetIdentity())
	case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		return fmt.Sprintf("%s %s %s", act, activity.EscapeID(e.GetActivityType()), preview(e.GetInput()))
	case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_STARTED:
		return fmt.Sprintf("%s attempt %d by %s", act, e.GetAttempt(), activity.EscapeID(e.GetIdentity()))
	case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		return act + " → " + preview(e.GetResult())
	case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED:
		return act + " " + failureLine(e.GetFailure())
	case durablev1.EventType_EVENT_TYPE_ACTIVITY_DEAD_LETTERED:
		return fmt.Sprintf("%s after %d attempts: %s", act, e.GetAttempt(), failureLine(e.GetFailure()))
	case durablev1.EventType_EVENT_TYPE_ACTIVITY_REDRIVEN:
		// Who and why, as the audit log has them.
		s := act
		if p := e.GetPrincipal(); p != "" {
			s += " by " + p
		}
		if r := oneLine(e.GetReason()); r != "" {
			s += " · " + r
		}
		return s
	case durablev1.EventType_EVENT_TYPE_TIMER_STARTED:
		return fmt.Sprintf("timer %s for %s", activity.EscapeID(e.GetTimerId()), shortDur(e.GetTimerDuration().AsDuration()))
	case durablev1.EventType_EVENT_TYPE_TIMER_FIRED:
		return "timer " + activity.EscapeID(e.GetTimerId())
	}
	return ""
}
