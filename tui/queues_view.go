package tui

import (
	"fmt"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"strings"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// queueColumns are wf queues' columns; STATUS, the cause, is kept first.
var queueColumns = []column{
	{title: "QUEUE", min: 10, prio: 2, mid: true},
	{title: "POLLERS", min: 7, prio: 1},
	{title: "BACKLOG", min: 7, prio: 1},
	{title: "OLDEST", min: 6},
	{title: "WF TASKS", min: 8, prio: 1},
	{title: "LEASES", min: 6, prio: 1},
	{title: "STATUS", min: 9, keep: 26},
}

// queueCells is one queue's row; a queue with ready work and no poller is
// in the warning style from end to end.
func (m Model) queueCells(st *Styles, q *durablev1.TaskQueue) []cell {
	style, statusStyle := &st.Row, &st.Muted
	if q.GetStalled() {
		style, statusStyle = &st.Warning, &st.Warning
	}
	oldest := "-"
	if t, ok := client.OldestReady(q); ok {
		oldest = span(m.now.Sub(t))
	}
	return []cell{
		{text: activity.EscapeID(q.GetName()), style: style},
		{text: client.PollersText(q), short: fmt.Sprint(len(q.GetPollers())), style: style},
		{text: client.BacklogText(q.GetActivityTasks()), short: backlogShort(q.GetActivityTasks()), style: style},
		{text: oldest, style: style},
		{text: client.BacklogText(q.GetWorkflowTasks()), short: backlogShort(q.GetWorkflowTasks()), style: style},
		{text: client.LeasesText(q), short: fmt.Sprint(client.LeaseCount(q)), style: style},
		{text: client.QueueStatus(q), short: queueShortStatus(q), style: statusStyle},
	}
}

// queuesScreen lists the task queues, those with work and no poller first.
type queuesScreen struct{ list }

// Tab is "queues" and how many the daemon lists.
func (c queuesScreen) Tab(m Model) (name, count string) {
	return "queues", tabCount(len(m.st.queues.list))
}

// Help lists the queues view's keys.
func (c queuesScreen) Help(k KeyMap) (short, full []key.Binding) {
	return []key.Binding{k.Open}, []key.Binding{k.Open, k.Copy}
}

// SetSize keeps the cursor on a queue and the queue on screen.
func (c queuesScreen) SetSize(m Model, rows int) Model {
	m.views.queues.list = c.list.clamp(len(m.st.queues.list), rows)
	return m
}

// Update answers the queues view's keys: enter opens a queue.
func (c queuesScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	if l, ok := m.moveList(c.list, msg, len(m.st.queues.list)); ok {
		m.views.queues.list = l
		return m, nil, true
	}
	if c.cursor >= len(m.st.queues.list) {
		return m, nil, false
	}
	name := m.st.queues.list[c.cursor].GetName()
	switch {
	case key.Matches(msg, m.keys.Open):
		return m.openQueue(name), nil, true
	case key.Matches(msg, m.keys.Copy):
		m, cmd := m.copyID(name, activity.EscapeID(name))
		return m, cmd, true
	}
	return m, nil, false
}

// View is the queues on screen.
func (c queuesScreen) View(m Model, h int) string {
	if len(m.st.queues.list) == 0 {
		if !m.conn.synced {
			return ""
		}
		return "\n  " + m.styles.Muted.Render("no task queues: no work, no leases and no poller seen in the last five minutes")
	}
	end := min(c.offset+max(h-1, 0), len(m.st.queues.list))
	st := m.styles
	rows := make([][]cell, 0, end-c.offset)
	for _, q := range m.st.queues.list[c.offset:end] {
		rows = append(rows, m.queueCells(&st, q))
	}
	return renderTable(m.styles, queueColumns, rows, m.width, c.cursor-c.offset)
}

// openQueue shows a queue's pollers and leases.
func (m Model) openQueue(name string) Model {
	m = m.openFrom(screenQueue)
	m.views.queue = queueScreen{name: name}
	return m
}

// queueScreen is one queue: its row, who polls it, who holds its leases
// and the workflows whose task waits in it.
type queueScreen struct {
	name   string
	scroll int
}

// Help lists the queue's keys.
func (c queueScreen) Help(k KeyMap) (short, full []key.Binding) {
	short = []key.Binding{k.Back, k.Up, k.Down}
	return short, append(append([]key.Binding{}, short...), k.Copy)
}

// SetSize: the view keeps the scroll within the queue.
func (c queueScreen) SetSize(m Model, _ int) Model { return m }

// Update scrolls, copies the queue's name, and esc goes back.
func (c queueScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	switch {
	case key.Matches(msg, m.keys.Back):
		return m.goBack(), nil, true
	case key.Matches(msg, m.keys.Copy):
		m, cmd := m.copyID(c.name, activity.EscapeID(c.name))
		return m, cmd, true
	}
	if s, ok := m.scrollBy(c.scroll, msg); ok {
		m.views.queue.scroll = s
		return m, nil, true
	}
	return m, nil, false
}

// View is the queue in full.
func (c queueScreen) View(m Model, h int) string {
	st := m.styles
	name := c.name
	q := m.st.queueOf(name)
	lines := []string{st.Label.Render("task queue " + activity.EscapeID(name))}
	if q == nil {
		lines = append(lines, "", st.Muted.Render("  not listed: no work, no leases and no poller seen in the last five minutes"))
	} else {
		status := client.QueueStatus(q)
		if q.GetStalled() {
			status = st.Warning.Render(status)
		}
		lines = append(lines,
			"  status     "+status,
			"  wf tasks   "+readyText(q.GetWorkflowTasks()),
			"  activities "+readyText(q.GetActivityTasks()),
			"  oldest     "+m.oldestText(q),
			"  leases     "+client.LeasesText(q),
			"", st.Header.Render("  POLLERS"))
		if len(q.GetPollers()) == 0 {
			lines = append(lines, st.Muted.Render("  none in the last five minutes"))
		} else {
			rows := make([][]cell, 0, len(q.GetPollers()))
			for _, p := range q.GetPollers() {
				parked := "no"
				if p.GetParked() {
					parked = "yes"
				}
				rows = append(rows, []cell{
					{text: dashed(activity.EscapeID(p.GetIdentity()))},
					{text: kindName(p.GetKind())},
					{text: age(m.now, p.GetLastPollTime()), style: &st.Muted},
					{text: parked},
				})
			}
			lines = append(lines, renderTable(st, pollerColumns, rows, m.width, -1))
		}
		lines = append(lines, "", st.Header.Render("  LEASES"))
		if len(q.GetLeases()) == 0 {
			lines = append(lines, st.Muted.Render("  none"))
		} else {
			rows := make([][]cell, 0, len(q.GetLeases()))
			for _, l := range q.GetLeases() {
				rows = append(rows, []cell{
					{text: dashed(activity.EscapeID(l.GetIdentity()))},
					{text: fmt.Sprint(l.GetActivities())},
				})
			}
			lines = append(lines, renderTable(st, leaseColumns, rows, m.width, -1))
		}
	}
	if waits := m.st.stalledOn(name); len(waits) > 0 {
		lines = append(lines, "", st.Header.Render("  STALLED WORKFLOW TASKS"))
		for _, w := range waits {
			lines = append(lines, "  "+st.Warning.Render(activity.EscapeID(w.GetWorkflowId())+"  "+
				"waiting "+span(m.now.Sub(w.GetNextAttemptTime().AsTime()))))
		}
	}
	lines = strings.Split(strings.Join(lines, "\n"), "\n")
	scroll := min(c.scroll, max(len(lines)-h, 0))
	return strings.Join(lines[scroll:], "\n")
}

var pollerColumns = []column{
	{title: "IDENTITY", min: 10, prio: 0, mid: true},
	{title: "KIND", min: 8},
	{title: "LAST POLL", min: 9},
	{title: "PARKED", min: 6},
}

var leaseColumns = []column{
	{title: "WORKER", min: 10, mid: true},
	{title: "ACTIVITIES", min: 10},
}

func (m Model) oldestText(q *durablev1.TaskQueue) string {
	t, ok := client.OldestReady(q)
	if !ok {
		return "nothing ready"
	}
	return "ready " + span(m.now.Sub(t)) + " ago"
}

func dashed(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func kindName(k durablev1.TaskKind) string {
	switch k {
	case durablev1.TaskKind_TASK_KIND_WORKFLOW:
		return "workflow"
	case durablev1.TaskKind_TASK_KIND_ACTIVITY:
		return "activity"
	}
	return "unknown"
}

// backlogShort is backlogText in a narrow column: "1 +1".
func backlogShort(b *durablev1.TaskBacklog) string {
	if b.GetLater() > 0 {
		return fmt.Sprintf("%d +%d", b.GetReady(), b.GetLater())
	}
	return ""
}

func queueShortStatus(q *durablev1.TaskQueue) string {
	if q.GetStalled() {
		return "no poller"
	}
	return ""
}

// readyText is "1 ready, 1 later".
func readyText(b *durablev1.TaskBacklog) string {
	s := fmt.Sprintf("%d ready", b.GetReady())
	if b.GetLater() > 0 {
		s += fmt.Sprintf(", %d later", b.GetLater())
	}
	return s
}

// putQueues takes a new queue list, keeping the queues screen's cursor on
// the queue it was on as the order changes.
func (m Model) putQueues(list []*durablev1.TaskQueue) Model {
	l := &m.views.queues.list
	name := ""
	if l.cursor < len(m.st.queues.list) {
		name = m.st.queues.list[l.cursor].GetName()
	}
	m.st.putQueues(list)
	for i, q := range m.st.queues.list {
		if q.GetName() == name {
			l.cursor = i
		}
	}
	if m.st.attempts.filter.sel.NoPoller {
		return m.clamp(screenAttempts)
	}
	return m
}
