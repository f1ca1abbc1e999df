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
		_, wasLive := m.st.acts[m.views.detail.key]
		m = m.sawEvent(msg.at, msg.ev.GetServerTime())
		m = m.apply(msg.ev).settleNow().letterOutcome()
		var reread tea.Cmd
		m, reread = m.refreshTimeline(msg.ev)
		next := recvCmd(m.conn.stream, msg.gen, m.p.ClockFunc)
		if reread != nil {
			next = tea.Batch(next, reread)
		}
		if _, live := m.st.acts[m.views.detail.key]; wasLive && !live && m.screen == screenDetail {
			// The activity in the detail finished: read its whole trail,
			// and the history that now says how it ended.
			a := m.views.detail.last
			return m, tea.Batch(next, finishedCmd(m.p.Context, m.p.Backend, m.views.detail.key, refOf(a)),
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
		if msg.key == m.views.detail.key && msg.err == nil {
			m.views.detail.finished = msg.finished
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
	if m.views.detail.last.GetWorkflowId() == msg.workflowID {
		m.views.detail.history, m.views.detail.historyErr, m.views.detail.loading = msg.events, errText, false
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
	if t, ok := m.active().(ticking); ok && t.Urgent(m, m.bodyRows()) {
		return 100 * time.Millisecond
	}
	return time.Second
}

// bodyRows is how many table rows fit between the header lines and the help.
func (m Model) bodyRows() int {
	return max(m.height-2-lipgloss.Height(m.statusView())-lipgloss.Height(m.helpView()), 1)
}

// clampAll keeps every screen's place inside its data and on screen after
// the data or the size changed.
// The body's height is measured once (it renders the status and help
// lines), not once a screen.
func (m Model) clampAll() Model {
	rows := m.bodyRows()
	for s := screen(0); s < screenCount; s++ {
		m = m.views.get(s).SetSize(m, rows)
	}
	return m
}

// clamp keeps the place of screen s valid.
func (m Model) clamp(s screen) Model { return m.views.get(s).SetSize(m, m.bodyRows()) }

// detailActivity is the live version of the activity in the detail pane, or
// once it is no longer pending, how it finished (the last one seen until
// the daemon has said).
func (m Model) detailActivity() *durablev1.PendingActivity {
	d := m.views.detail
	if a, ok := m.st.acts[d.key]; ok {
		return a
	}
	if f := d.finished; f != nil {
		return f.GetActivity()
	}
	return d.last
}
