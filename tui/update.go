package tui

import (
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Update applies one message. Data changes cost in proportion to what the
// event carried; the clock (a tick, the arrival of an event) only moves
// m.now.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.Width = msg.Width
		m.input.Width = max(msg.Width-4, 10)
		if m.confirm != nil {
			c := *m.confirm
			c.reason.Width = reasonWidth(msg.Width)
			m.confirm = &c
		}
		return m.clampAll(), nil
	case tickMsg:
		m = m.sawTime(msg.now).expireFlash()
		sel := m.selectedKeys()
		m.st.advance(m.now)
		m = m.clockMoved()
		m = m.followSelection(sel).clampAll()
		return m, tickCmd(m.tickInterval(), m.p.ClockFunc)
	case streamOpenedMsg:
		if msg.gen != m.conn.gen {
			msg.stream.cancel()
			return m, nil
		}
		m.conn.stream = msg.stream
		m.conn.stageActs, m.conn.stageWfs, m.conn.stageOps, m.conn.stagePolicy = nil, nil, nil, nil
		return m, recvCmd(msg.stream, msg.gen, m.p.ClockFunc)
	case watchEventMsg:
		if msg.gen != m.conn.gen {
			return m, nil
		}
		_, wasLive := m.st.acts[m.detail.key]
		m = m.sawEvent(msg.at, msg.ev.GetServerTime())
		m = m.apply(msg.ev).settleNow().letterOutcome()
		var reread tea.Cmd
		m, reread = m.refreshTimeline(msg.ev)
		next := recvCmd(m.conn.stream, msg.gen, m.p.ClockFunc)
		if reread != nil {
			next = tea.Batch(next, reread)
		}
		if _, live := m.st.acts[m.detail.key]; wasLive && !live && m.screen == screenDetail {
			// The activity in the detail finished: read its whole trail,
			// and the history that now says how it ended.
			a := m.detail.last
			return m, tea.Batch(next, finishedCmd(m.p.Context, m.p.Backend, m.detail.key, refOf(a)),
				historyCmd(m.p.Context, m.p.Backend, a.GetWorkflowId()))
		}
		if msg.ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
			// Changes to the audit log arrive on the stream from now on;
			// what came before is read once per (re)connection.
			m.audit.loading = true
			return m, tea.Batch(next, auditCmd(m.p.Context, m.p.Backend))
		}
		return m, next
	case streamErrMsg:
		if msg.gen != m.conn.gen {
			return m, nil
		}
		m = m.sawTime(msg.at)
		if status.Code(msg.err) == codes.Aborted {
			return m.resubscribe()
		}
		return m.disconnected(msg.err)
	case reconnectMsg:
		if msg.gen != m.conn.gen {
			return m, nil
		}
		m.conn.gen++
		m.conn.retrying = true
		return m, connectCmd(m.p.Context, m.p.Backend, m.conn.gen)
	case historyMsg:
		return m.gotHistory(msg), nil
	case timelineMsg:
		return m.gotTimeline(msg)
	case timelineDueMsg:
		return m.timelineDue(msg)
	case copyFailedMsg:
		return m.warn("copy failed: " + errorText(msg.err)), nil
	case finishedMsg:
		if msg.key == m.detail.key && msg.err == nil {
			m.detail.finished = msg.finished
		}
		return m, nil
	case statsMsg:
		return m.gotStats(msg), nil
	case statsTickMsg:
		return m.statsTicked(msg)
	case auditMsg:
		return m.gotAudit(msg), nil
	case redriveDoneMsg:
		// The outcome may take two lines: keep the cursor on screen.
		return m.redriveDone(msg).clampAll(), nil
	case cancelDoneMsg:
		return m.cancelDone(msg).clampAll(), nil
	case overrideDoneMsg:
		return m.overrideDone(msg), nil
	case tea.KeyMsg:
		return m.key(msg)
	}
	if m.filtering {
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(msg)
		return m, cmd
	}
	return m, nil
}

// apply folds one Watch event into the state. Snapshot chunks are staged and
// replace the state at SNAPSHOT_DONE, so a resynchronisation never mixes the
// old world with the new.
func (m Model) apply(ev *durablev1.WatchEvent) Model {
	sel := m.selectedKeys()
	m.st.advance(m.now)
	switch ev.GetKind() {
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT:
		m.conn.stageActs = append(m.conn.stageActs, ev.GetActivities()...)
		m.conn.stageWfs = append(m.conn.stageWfs, ev.GetWorkflows()...)
		m.conn.stageOps = append(m.conn.stageOps, ev.GetOperations()...)
		m.conn.stagePolicy = append(m.conn.stagePolicy, ev.GetPolicyOverrides()...)
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE:
		m.st.queues.set(ev.GetTaskQueues().GetTaskQueues())
		m.st.queues.known = ev.GetTaskQueues() != nil
		m.st.replaceWith(m.conn.stageActs, m.conn.stageWfs)
		m.ops.replaceWith(m.conn.stageOps)
		m.st.overrides = nil
		m.st.putOverrides(m.conn.stagePolicy)
		m.conn.stageActs, m.conn.stageWfs, m.conn.stageOps, m.conn.stagePolicy = nil, nil, nil, nil
		m.conn.live, m.conn.synced, m.conn.retrying = true, true, false
		m.conn.failures, m.conn.lastErr = 0, ""
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT:
		m.st.upsertActivities(ev.GetActivities())
		m.st.upsertWorkflows(ev.GetWorkflows())
		if ev.GetTaskQueues() != nil {
			m = m.putQueues(ev.GetTaskQueues().GetTaskQueues())
		}
		m.st.putOverrides(ev.GetPolicyOverrides())
		m.audit.upsert(ev.GetAuditRecords())
		if len(ev.GetOperations()) > 0 {
			m = m.upsertOps(ev.GetOperations())
		}
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE:
		m.st.removeActivities(ev.GetRemoved())
	}
	if w := ev.GetWrites(); w != nil {
		m.conn.writes = w
	}
	m = m.followSelection(sel)
	if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
		m = m.settle()
	}
	return m.clampAll()
}

// resubscribe watches again at once after the daemon ended the stream
// because the console fell behind (Aborted): nothing is wrong with the
// connection, so there is no banner and no backoff; the state on screen
// stays until the new snapshot replaces it.
func (m Model) resubscribe() (Model, tea.Cmd) {
	m.conn.stream = nil
	m.conn.gen++
	return m, connectCmd(m.p.Context, m.p.Backend, m.conn.gen)
}

// disconnected keeps the last state on screen, as it was when the stream
// broke, and schedules a reconnection.
func (m Model) disconnected(err error) (Model, tea.Cmd) {
	if m.conn.live {
		// Every change up to now reached the console: the rows hold as of
		// this moment, and stop ageing here.
		m.clk.asOf = m.daemonNow()
	}
	m = m.newConnection()
	m.conn.live, m.conn.retrying = false, false
	m.conn.stream = nil
	m.conn.failures++
	m.conn.lastErr = errorText(err)
	d := m.p.ReconnectDelayFunc(m.conn.failures)
	m.conn.retryAt = m.clk.local.Add(d)
	return m.settleNow(), reconnectCmd(d, m.conn.gen)
}

func (m Model) gotHistory(msg historyMsg) Model {
	errText := ""
	if msg.err != nil {
		errText = msg.err.Error()
	}
	if m.detail.last.GetWorkflowId() == msg.workflowID {
		m.detail.history, m.detail.historyErr, m.detail.loading = msg.events, errText, false
	}
	return m
}

func (m Model) gotAudit(msg auditMsg) Model {
	m.audit.loading = false
	if msg.err != nil {
		m.audit.err = errorText(msg.err)
		return m
	}
	m.audit.err, m.audit.loaded = "", true
	m.audit.load(msg.records)
	return m.clamp(screenAudit)
}

// tickInterval is a second, or a tenth when a visible countdown is under ten
// seconds and shows tenths.
func (m Model) tickInterval() time.Duration {
	if m.stale() {
		return time.Second // the rows stand still; only the banner counts
	}
	urgent := false
	switch m.screen {
	case screenAttempts:
		for _, a := range m.st.attempts.set.Window(m.lists[screenAttempts].offset, m.bodyRows()) {
			if waitOf(a, m.now).urgent {
				urgent = true
				break
			}
		}
	case screenDetail:
		if a := m.detailActivity(); a != nil {
			urgent = waitOf(a, m.now).urgent
		}
	}
	if urgent {
		return 100 * time.Millisecond
	}
	return time.Second
}

// listLen is the number of rows of a list screen.
func (m Model) listLen(s screen) int {
	switch s {
	case screenAttempts:
		return m.st.attempts.set.Len()
	case screenDeadLetters:
		if m.grouped {
			return len(m.st.dead.groupOrder)
		}
		return m.st.dead.set.Len()
	case screenWorkflows:
		return m.st.workflows.Len()
	case screenAudit:
		return len(m.audit.order)
	case screenOperations:
		return m.ops.set.Len()
	case screenQueues:
		return len(m.st.queues.list)
	case screenStats:
		return len(m.stats.rows)
	}
	return 0
}

// cursorOf returns the cursor of a list screen.
func (m *Model) cursorOf(s screen) *list {
	if s == screenDeadLetters && m.grouped {
		return &m.groupList
	}
	return &m.lists[s]
}

// bodyRows is how many table rows fit between the header lines and the help.
func (m Model) bodyRows() int {
	return max(m.height-2-lipgloss.Height(m.statusView())-lipgloss.Height(m.helpView()), 1)
}

// clampAll keeps every cursor inside its list and on screen after the data or
// the size changed.
// The body's height is measured once (it renders the status and help
// lines), not once a list.
func (m Model) clampAll() Model {
	rows := m.bodyRows()
	for s := screenAttempts; s <= lastList; s++ {
		m = m.clampTo(s, rows)
	}
	return m
}

func (m Model) clamp(s screen) Model { return m.clampTo(s, m.bodyRows()) }

// clampTo keeps the cursor of s inside its list and within rows of the top.
func (m Model) clampTo(s screen, rows int) Model {
	l := m.cursorOf(s)
	n := m.listLen(s)
	l.cursor = min(max(l.cursor, 0), max(n-1, 0))
	if l.cursor < l.offset {
		l.offset = l.cursor
	}
	if l.cursor >= l.offset+rows {
		l.offset = l.cursor - rows + 1
	}
	l.offset = min(max(l.offset, 0), max(n-rows, 0))
	return m
}

// move moves the cursor of the current list by delta rows.
func (m Model) move(delta int) Model {
	switch m.screen {
	case screenDetail:
		m.detail.scroll = max(m.detail.scroll+delta, 0)
		return m
	case screenTimeline:
		return m.scrollTimeline(delta)
	case screenAuditRecord:
		m.audit.scroll = max(m.audit.scroll+delta, 0)
		return m
	case screenOperation:
		m.ops.scroll = max(m.ops.scroll+delta, 0)
		return m
	case screenQueue:
		m.st.queues.scroll = max(m.st.queues.scroll+delta, 0)
		return m
	}
	l := m.cursorOf(m.screen)
	l.cursor += delta
	return m.clamp(m.screen)
}

// selectedActivity is the activity under the cursor of an activity list.
func (m Model) selectedActivity() *durablev1.PendingActivity {
	var l *activityList
	switch m.screen {
	case screenAttempts:
		l = m.st.attempts
	case screenDeadLetters:
		if m.grouped {
			return nil
		}
		l = m.st.dead
	default:
		return nil
	}
	c := m.lists[m.screen].cursor
	if c >= l.set.Len() {
		return nil
	}
	return l.set.At(c)
}

func (m Model) selectedGroup() *failureGroup {
	if m.screen != screenDeadLetters || !m.grouped || m.groupList.cursor >= len(m.st.dead.groupOrder) {
		return nil
	}
	return m.st.dead.groupOrder[m.groupList.cursor]
}

// detailActivity is the live version of the activity in the detail pane, or
// once it is no longer pending, how it finished (the last one seen until
// the daemon has said).
func (m Model) detailActivity() *durablev1.PendingActivity {
	if a, ok := m.st.acts[m.detail.key]; ok {
		return a
	}
	if f := m.detail.finished; f != nil {
		return f.GetActivity()
	}
	return m.detail.last
}
