package tui

import (
	"context"
	"fmt"
	"github.com/charmbracelet/bubbles/key"
	"strconv"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// statsRefresh is how often the stats view reads the numbers again while it
// is shown; it does not read them when it is not.
const statsRefresh = 10 * time.Second

// statsLog is what the stats view shows: the latency per activity type as
// last read, with the policy in force.
type statsLog struct {
	rows    []*durablev1.ActivityTypeStats
	loaded  bool
	loading bool
	err     string
	// at is when the numbers were read.
	at time.Time
	// gen tells the ticks of one visit from those of an earlier one: a tick
	// of an old visit, or one that arrives when the view is not shown,
	// reads nothing and schedules nothing.
	gen int
}

// count is the tab's count of types, once they have been read.
func (s statsLog) count() string {
	if !s.loaded {
		return ""
	}
	return fmt.Sprintf(" (%d)", len(s.rows))
}

type (
	statsMsg struct {
		gen  int
		rows []*durablev1.ActivityTypeStats
		err  error
	}
	statsTickMsg struct{ gen int }
)

// statsCmd reads the latency per activity type over every attempt counted.
func statsCmd(ctx context.Context, b Backend, gen int) tea.Cmd {
	return func() tea.Msg {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		rows, err := b.Stats(cctx, time.Time{})
		return statsMsg{gen: gen, rows: rows, err: err}
	}
}

func statsTick(gen int) tea.Cmd {
	return tea.Tick(statsRefresh, func(time.Time) tea.Msg { return statsTickMsg{gen: gen} })
}

// statsScreen is P50/P95/P99 per activity type with the policy in force
// and what to change in it; it reads the numbers when it is shown and
// every statsRefresh while it stays.
type statsScreen struct {
	list
	statsLog
}

// Tab is "stats" and, once read, how many types.
func (c statsScreen) Tab(Model) (name, count string) { return "stats", c.count() }

// Help lists the stats view's keys: none of its own.
func (c statsScreen) Help(KeyMap) (short, full []key.Binding) { return nil, nil }

// SetSize keeps the cursor on a type and the type on screen.
func (c statsScreen) SetSize(m Model, rows int) Model {
	m.views.stats.list = c.list.clamp(len(c.rows), rows)
	return m
}

// Update moves the cursor.
func (c statsScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	if l, ok := m.moveList(c.list, msg, len(c.rows)); ok {
		m.views.stats.list = l
		return m, nil, true
	}
	return m, nil, false
}

// Enter reads the numbers and starts the refresh.
func (c statsScreen) Enter(m Model) (Model, tea.Cmd) {
	s := &m.views.stats
	s.gen++
	s.loading = true
	return m, tea.Batch(statsCmd(m.p.Context, m.p.Backend, s.gen), statsTick(s.gen))
}

func (m Model) gotStats(msg statsMsg) Model {
	if msg.gen != m.views.stats.gen {
		return m
	}
	m.views.stats.loading = false
	if msg.err != nil {
		m.views.stats.err = errorText(msg.err)
		return m
	}
	m.views.stats.err, m.views.stats.loaded, m.views.stats.at = "", true, m.now
	m.views.stats.rows = msg.rows
	return m.clamp(screenStats)
}

// statsTicked reads the numbers again if the view is still shown.
func (m Model) statsTicked(msg statsTickMsg) (Model, tea.Cmd) {
	if msg.gen != m.views.stats.gen || m.screen != screenStats {
		return m, nil
	}
	return m, tea.Batch(statsCmd(m.p.Context, m.p.Backend, m.views.stats.gen), statsTick(m.views.stats.gen))
}

// statsColumns: the advice, the cause, is kept readable at 80 columns;
// the policy in force reads "start-to-close · initial backoff · attempts",
// as the note under the table says.
var statsColumns = []column{
	{title: "TYPE", min: 10, prio: 1, mid: true},
	{title: "N", min: 4, drop: 2},
	{title: "P50", min: 5, drop: 1},
	{title: "P95", min: 5},
	{title: "P99", min: 5},
	{title: "POLICY", min: 10, prio: 1},
	{title: "ADVICE", min: 20, keep: 40},
}

// statsAdvice is the advice cell of one type, from client.CheckPolicy (the
// rule wf stats --check-policy applies): the start-to-close finding when it
// warns, else what the rules of thumb suggest. short is for a narrow
// terminal.
func statsAdvice(s *durablev1.ActivityTypeStats) (text, short string, warn bool) {
	p95, p99 := s.GetP95().AsDuration(), s.GetP99().AsDuration()
	h := client.HumanDuration
	p := client.PolicyOfOptions(s.GetOptionsInForce())
	for _, f := range client.CheckPolicy(p, p95, p99) {
		if f.Check == "start-to-close" && !f.OK {
			return "start-to-close " + f.Note,
				fmt.Sprintf("start-to-close %s < 2×P99: use ≈%s", h(p.StartToClose), h(2*p99)), true
		}
	}
	return fmt.Sprintf("ok · start-to-close ≈ 2×P99 = %s, initial ≈ P95 = %s", h(2*p99), h(p95)),
		fmt.Sprintf("ok · ≈%s, initial ≈%s", h(2*p99), h(p95)), false
}

// statsPolicy is the policy in force of one type; "*" marks one an override
// changed.
func statsPolicy(s *durablev1.ActivityTypeStats) (text, short string) {
	if s.GetOptionsInForce() == nil {
		return "unknown (defaults)", "defaults"
	}
	p := client.PolicyOfOptions(s.GetOptionsInForce())
	stc := "none"
	if p.StartToClose > 0 {
		stc = client.HumanDuration(p.StartToClose)
	}
	initial := client.HumanDuration(activity.Backoff(p.Retry, 1))
	text = fmt.Sprintf("%s · %s · %d", stc, initial, p.MaxAttempts)
	short = fmt.Sprintf("%s·%s·%d", stc, initial, p.MaxAttempts)
	if len(s.GetOverriddenFields()) > 0 {
		text, short = text+" *", short+"*"
	}
	return text, short
}

func (m Model) statsCells(st *Styles, s *durablev1.ActivityTypeStats) []cell {
	advice, adviceShort, warn := statsAdvice(s)
	adviceStyle := &st.Muted
	if warn {
		adviceStyle = &st.Warning
	}
	policy, policyShort := statsPolicy(s)
	d := func(x interface{ AsDuration() time.Duration }) string { return client.HumanDuration(x.AsDuration()) }
	return []cell{
		{text: activity.EscapeID(s.GetActivityType()), style: &st.Row},
		{text: strconv.FormatInt(s.GetAttempts(), 10), style: &st.Row},
		{text: d(s.GetP50()), style: &st.Row},
		{text: d(s.GetP95()), style: &st.Row},
		{text: d(s.GetP99()), style: &st.Row},
		{text: policy, short: policyShort, style: &st.Row},
		{text: advice, short: adviceShort, style: adviceStyle},
	}
}

// View is the types on screen, and how to read them.
func (c statsScreen) View(m Model, h int) string {
	switch {
	case c.err != "" && !c.loaded:
		return "\n  " + m.styles.Warning.Render("stats: "+c.err)
	case !c.loaded:
		return "\n  " + m.styles.Muted.Render("reading activity stats…")
	case len(c.rows) == 0:
		return "\n  " + m.styles.Muted.Render("no activity attempts recorded yet")
	}
	l := c.list
	end := min(l.offset+max(h-5, 0), len(c.rows))
	st := m.styles
	rows := make([][]cell, 0, end-l.offset)
	for _, s := range c.rows[l.offset:end] {
		rows = append(rows, m.statsCells(&st, s))
	}
	note := []string{
		"as of " + c.at.UTC().Format("15:04:05 UTC") + " · rule of thumb: start-to-close ≈ 2×P99, initial ≈ P95",
		"POLICY: start-to-close · initial backoff · attempts (* override)",
		"every check, and what-if flags: wf stats --check-policy",
	}
	if c.err != "" {
		note[0] = "as of " + c.at.UTC().Format("15:04:05 UTC") + " · refresh failed: " + c.err
	}
	out := renderTable(m.styles, statsColumns, rows, m.width, l.cursor-l.offset) + "\n"
	for _, n := range note {
		out += "\n" + m.styles.Muted.Render(fit(n, m.width))
	}
	return out
}
