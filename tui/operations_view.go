package tui

import (
	"fmt"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/tinyllm/durable/activity"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maxOpIDWidth bounds how wide the ID column grows for long ids.
const maxOpIDWidth = 14

// nodeColumn is the node that runs each operation, shown where nodes share
// a store; it goes first on a narrow terminal.
var nodeColumn = column{title: "NODE", min: 6, grow: 1, drop: 6}

// opColumns keep the progress and the times on a narrow terminal; who, what
// and the finer counts come back as it widens (the full record has them all).
var opColumns = []column{
	{title: "ID", min: 5},
	{title: "STATE", min: 9},
	{title: "BY", min: 7, drop: 2},
	{title: "SELECTION", min: 14, grow: 4, drop: 3},
	{title: "PROGRESS", min: 18},
	{title: "SKIPPED", min: 7, drop: 4},
	{title: "DEAD AGAIN", min: 10, drop: 4},
	{title: "RATE", min: 5, drop: 5},
	{title: "STARTED", min: 10},
	{title: "FINISHED", min: 10},
	{title: "REASON", min: 10, grow: 3, drop: 1},
}

// opStateName is an operation's state in a word.
func opStateName(s durablev1.OperationState) string {
	switch s {
	case durablev1.OperationState_OPERATION_STATE_RUNNING:
		return "running"
	case durablev1.OperationState_OPERATION_STATE_COMPLETED:
		return "completed"
	case durablev1.OperationState_OPERATION_STATE_CANCELLED:
		return "cancelled"
	}
	return "unknown"
}

// opEnded says how a finished operation ended: "has completed", "was
// cancelled".
func opEnded(op *durablev1.Operation) string {
	if isCancelled(op) {
		return "was cancelled"
	}
	return "has " + opStateName(op.GetState())
}

// rateText is a rate as the operator typed it: "50/s", "2.5/s".
func rateText(r float64) string {
	return strconv.FormatFloat(r, 'f', -1, 64) + "/s"
}

// An operation's pace is measured once it has this much to go on; before,
// its ETA is at the rate it was given.
const (
	paceAfter   = 2 * time.Second
	paceLetters = 2
)

// opPace is how fast an operation gets through its letters: those dealt
// with (released or skipped) after the first, which goes at the start, over
// the time since it started, by the daemon's clock as the console reads it.
// The rate it was given is only a ceiling: each release is a transaction
// and waits for its sync, so a busy daemon goes slower. measured is false,
// and rate the given one, until there is enough to measure.
func opPace(op *durablev1.Operation, now time.Time) (rate float64, measured bool) {
	end := now
	if f := op.GetFinishedTime(); f != nil {
		end = f.AsTime()
	}
	took := end.Sub(op.GetStartedTime().AsTime())
	if took < paceAfter || opDone(op) < paceLetters {
		return op.GetRate(), false
	}
	return float64(opDone(op)-1) / took.Seconds(), true
}

// opTimeLeft is how long the letters not yet dealt with take at the
// operation's pace, rounded up to a tenth of a second so that work left
// never reads as none.
func opTimeLeft(op *durablev1.Operation, now time.Time) time.Duration {
	rate, _ := opPace(op, now)
	if rate <= 0 {
		return 0
	}
	tenths := math.Ceil(float64(op.GetLeft()) / rate * 10)
	return time.Duration(tenths) * 100 * time.Millisecond
}

// paceText is "4.8/s", the measured pace, or "5/s set" while there is only
// the rate it was given.
func paceText(op *durablev1.Operation, now time.Time) string {
	rate, measured := opPace(op, now)
	if !measured {
		return rateText(rate) + " set"
	}
	return strconv.FormatFloat(rate, 'f', 1, 64) + "/s"
}

// inDLQ is how many of an operation's letters are in the dead-letter queue
// because of how far it got: those it has not released yet (or, cancelled,
// never will) and those it released that have dead-lettered again.
func inDLQ(op *durablev1.Operation) int64 { return op.GetLeft() + op.GetReDeadLettered() }

// bar draws done of total in w cells: [#####-----].
func bar(done, total int64, w int) string {
	filled := 0
	if total > 0 {
		filled = int(min(done, total) * int64(w) / total)
	} else {
		filled = w
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat("-", w-filled) + "]"
}

// opSelection says what an operation selected: its filter, or how many
// letters it was given by name.
func opSelection(op *durablev1.Operation) string {
	if op.GetListed() {
		return thousands(int(op.GetMatched())) + " listed"
	}
	return filterWords(op.GetFilter())
}

// opCounts is "120/300 released", with the skipped and re-dead-lettered
// letters when there are any.
func opCounts(op *durablev1.Operation) string {
	s := fmt.Sprintf("%s/%s released", thousands(int(op.GetReleased())), thousands(int(op.GetMatched())))
	if n := op.GetSkipped(); n > 0 {
		s += " · " + thousands(int(n)) + " skipped"
	}
	if n := op.GetReDeadLettered(); n > 0 {
		s += " · " + thousands(int(n)) + " dead again"
	}
	return s
}

// opProgressLine is the status line of a running operation, in outcomes
// as the daemon reports them: released, re-dead-lettered, and what is
// still in the dead-letter queue, at the pace measured so far and the time
// the rest takes at it. What does not fit goes, the least needed first;
// the operations screen has it all.
func (m Model) opProgressLine(op *durablev1.Operation) string {
	left := "finishing"
	if op.GetLeft() > 0 {
		left = "~" + span(opTimeLeft(op, m.now)) + " left"
	}
	end := "x cancels"
	if m.cancelling == op.GetId() {
		end = "cancelling…"
	}
	who := ""
	if !m.follows(op.GetId()) && op.GetPrincipal() != "" {
		who = " by " + op.GetPrincipal()
	}
	parts := []struct {
		text     string
		optional int // dropped when too wide, the highest first
	}{
		{op.GetId(), 0},
		{who, 4},
		{" redriving " + bar(opDone(op), op.GetMatched(), min(20, max(m.width/10, 5))), 0},
		{fmt.Sprintf(" released %s of %s", thousands(int(op.GetReleased())), thousands(int(op.GetMatched()))), 0},
		{" · re-dead-lettered " + thousands(int(op.GetReDeadLettered())), 2},
		{" · " + thousands(int(inDLQ(op))) + " still in the DLQ", 1},
		{" · " + thousands(int(op.GetSkipped())) + " skipped", 6},
		{" · " + paceText(op, m.now), 5},
		{" · " + left, 0},
		{" · " + end, 3},
	}
	if op.GetSkipped() == 0 {
		parts[6].text = ""
	}
	for drop := 7; ; drop-- {
		var b strings.Builder
		for _, p := range parts {
			if p.optional < drop {
				b.WriteString(p.text)
			}
		}
		if s := b.String(); drop <= 1 || ansi.StringWidth(s) <= m.width {
			return s
		}
	}
}

// opOutcome says how an operation ended, or where it stands, in outcomes:
// what it released, what dead-lettered again since, and what that leaves
// in the dead-letter queue.
func opOutcome(op *durablev1.Operation) string {
	s := fmt.Sprintf("%s %s", op.GetId(), opStateName(op.GetState()))
	if isCancelled(op) && op.GetCancelledBy() != "" {
		s += " by " + op.GetCancelledBy()
	}
	s += fmt.Sprintf(": released %s of %s · re-dead-lettered %s · %s still in the DLQ",
		thousands(int(op.GetReleased())), thousands(int(op.GetMatched())),
		thousands(int(op.GetReDeadLettered())), thousands(int(inDLQ(op))))
	if n := op.GetSkipped(); n > 0 {
		s += fmt.Sprintf(" · %s skipped", thousands(int(n)))
	}
	if isCancelled(op) {
		if r := oneLine(op.GetCancelReason()); r != "" {
			s += fmt.Sprintf(" · reason %q", r)
		}
	}
	if f := op.GetFinishedTime(); f != nil {
		verb := "took"
		if isCancelled(op) {
			verb = "ran"
		}
		s += fmt.Sprintf(" · %s %s", verb, span(f.AsTime().Sub(op.GetStartedTime().AsTime())))
	}
	return s
}

func (m Model) opCells(op *durablev1.Operation) []cell {
	st := m.styles
	reason := cell{text: oneLine(op.GetReason())}
	if reason.text == "" {
		reason = cell{text: "—", style: &st.Muted}
	}
	stateStyle := st.opState(op.GetState())
	progress := fmt.Sprintf("%s %s/%s", bar(opDone(op), op.GetMatched(), 8),
		thousands(int(op.GetReleased())), thousands(int(op.GetMatched())))
	finished := cell{text: "—", style: &st.Muted}
	switch {
	case isRunning(op):
		finished = cell{text: "in ~" + span(opTimeLeft(op, m.now)), style: &st.Progress}
	case op.GetFinishedTime() != nil:
		finished = cell{text: auditAge(m.now, op.GetFinishedTime()) + " ago", style: &st.Muted}
	}
	return []cell{
		{text: op.GetId()},
		{text: opStateName(op.GetState()), style: &stateStyle},
		{text: op.GetPrincipal()},
		{text: opSelection(op)},
		{text: progress},
		{text: thousands(int(op.GetSkipped())), style: &st.Muted},
		{text: thousands(int(op.GetReDeadLettered())), style: &st.Muted},
		{text: rateText(op.GetRate()), style: &st.Muted},
		{text: auditAge(m.now, op.GetStartedTime()) + " ago", style: &st.Muted},
		finished,
		reason,
	}
}

// operationsScreen lists the operations the daemon told of, newest first.
type operationsScreen struct{ list }

// Tab is "ops", without a count.
func (c operationsScreen) Tab(Model) (name, count string) { return "ops", "" }

// Help lists the operations view's keys.
func (c operationsScreen) Help(k KeyMap) (short, full []key.Binding) {
	return []key.Binding{k.Open, k.CancelOp}, []key.Binding{k.Open, k.CancelOp, k.withReason(), k.Copy}
}

// SetSize keeps the cursor on an operation and the operation on screen.
func (c operationsScreen) SetSize(m Model, rows int) Model {
	m.views.operations.list = c.list.clamp(m.ops.set.Len(), rows)
	return m
}

// Update answers the operations view's keys: enter opens one, x cancels
// it.
func (c operationsScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	if l, ok := m.moveList(c.list, msg, m.ops.set.Len()); ok {
		m.views.operations.list = l
		return m, nil, true
	}
	op := c.selected(m)
	switch {
	case key.Matches(msg, m.keys.CancelOp):
		return m.askCancel(op), nil, true
	case op == nil:
		return m, nil, false
	case key.Matches(msg, m.keys.Open):
		m = m.openFrom(screenOperation)
		m.views.operation = operationScreen{id: op.GetId()}
		return m, nil, true
	case key.Matches(msg, m.keys.Copy):
		m, cmd := m.copyID(op.GetId(), activity.EscapeID(op.GetId()))
		return m, cmd, true
	}
	return m, nil, false
}

// selected is the operation under the cursor, nil on an empty list.
func (c operationsScreen) selected(m Model) *durablev1.Operation {
	if c.cursor >= m.ops.set.Len() {
		return nil
	}
	return m.ops.set.At(c.cursor)
}

// View is the operations on screen.
func (c operationsScreen) View(m Model, h int) string {
	st := m.styles
	set := m.ops.set
	if set.Len() == 0 {
		if !m.conn.synced {
			return "\n  " + st.Muted.Render("waiting for the daemon's snapshot…")
		}
		return strings.Join([]string{"",
			"  " + st.Muted.Render("no operations running or finished in the last day: R on the dead letters"),
			"  " + st.Muted.Render("view (or wf dlq redrive --all) starts one; wf ops list shows older ones")}, "\n")
	}
	// The id is what wf ops takes: its column is as wide as the longest
	// (ids of a database several nodes share run to many digits).
	cols := slices.Clone(opColumns)
	nodes := false // NODE only where nodes share a store
	for i := range set.Len() {
		op := set.At(i)
		cols[0].min = max(cols[0].min, min(len(op.GetId()), maxOpIDWidth))
		nodes = nodes || op.GetNode() != ""
	}
	if nodes {
		cols = slices.Insert(cols, 2, nodeColumn)
	}
	shown, widths := layout(cols, m.width)
	lines := []string{renderHeader(st, cols, shown, widths)}
	for i, op := range set.Window(c.offset, h-1) {
		cells := m.opCells(op)
		if nodes {
			cells = slices.Insert(cells, 2, cell{text: op.GetNode(), style: &st.Muted})
		}
		lines = append(lines, renderRow(st, cells, shown, widths, c.offset+i == c.cursor))
	}
	return strings.Join(lines, "\n")
}

// operationScreen is one operation in full, live as its progress arrives.
type operationScreen struct {
	id     string
	scroll int
}

// Help lists the operation's keys.
func (c operationScreen) Help(k KeyMap) (short, full []key.Binding) {
	short = []key.Binding{k.Back, k.CancelOp, k.Up, k.Down}
	return short, append(append([]key.Binding{}, short...), k.withReason(), k.Copy)
}

// SetSize: the view keeps the scroll within the operation.
func (c operationScreen) SetSize(m Model, _ int) Model { return m }

// Update scrolls, cancels the operation with x, and esc goes back.
func (c operationScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	op, _ := m.ops.get(c.id)
	switch {
	case key.Matches(msg, m.keys.Back):
		return m.goBack(), nil, true
	case key.Matches(msg, m.keys.CancelOp):
		return m.askCancel(op), nil, true
	case key.Matches(msg, m.keys.Copy) && op != nil:
		m, cmd := m.copyID(op.GetId(), activity.EscapeID(op.GetId()))
		return m, cmd, true
	}
	if s, ok := m.scrollBy(c.scroll, msg); ok {
		m.views.operation.scroll = s
		return m, nil, true
	}
	return m, nil, false
}

// View is the operation in full.
func (c operationScreen) View(m Model, h int) string {
	st := m.styles
	op, ok := m.ops.get(c.id)
	if !ok {
		return "\n  " + st.Muted.Render("this operation is no longer kept")
	}
	wrapAt := max(m.width-16, 20)
	var lines []string
	field := func(label, value string) {
		wrapped := strings.Split(ansi.Wordwrap(value, wrapAt, " ·,"), "\n")
		lines = append(lines, st.Label.Render(fmt.Sprintf("  %-13s", label))+wrapped[0])
		for _, l := range wrapped[1:] {
			lines = append(lines, strings.Repeat(" ", 15)+l)
		}
	}
	stateStyle := st.opState(op.GetState())
	lines = append(lines, st.Title.Render(fmt.Sprintf("%s · %s · ", op.GetId(), op.GetKind()))+
		stateStyle.Render(opStateName(op.GetState())), "")

	state := stateStyle.Render(opStateName(op.GetState()))
	switch {
	case isRunning(op) && op.GetLeft() > 0:
		at := "the pace so far"
		if _, measured := opPace(op, m.now); !measured {
			at = "the rate set"
		}
		state += fmt.Sprintf(" · %s of %s done · ~%s left at %s", thousands(int(opDone(op))),
			thousands(int(op.GetMatched())), span(opTimeLeft(op, m.now)), at)
	case isRunning(op):
		state += " · finishing"
	case isCancelled(op):
		who := op.GetCancelledBy()
		if who == "" {
			who = "—"
		}
		state += " by " + who
		if r := oneLine(op.GetCancelReason()); r != "" {
			state += fmt.Sprintf(" · reason %q", r)
		}
	}
	field("state", state)
	field("progress", fmt.Sprintf("%s %s of %s released", bar(opDone(op), op.GetMatched(), 20),
		thousands(int(op.GetReleased())), thousands(int(op.GetMatched()))))
	field("skipped", thousands(int(op.GetSkipped()))+st.Muted.Render(" (no longer dead-lettered when their turn came)"))
	left := thousands(int(op.GetLeft()))
	switch {
	case isRunning(op):
		left += st.Muted.Render(" not yet released")
	case isCancelled(op):
		left += st.Muted.Render(" stay in the dead-letter queue")
	}
	field("left", left)
	field("dead again", thousands(int(op.GetReDeadLettered()))+
		st.Muted.Render(" (released by it, dead-lettered since; it does not redrive them again)"))
	rate := rateText(op.GetRate())
	if pace, measured := opPace(op, m.now); measured {
		rate += st.Muted.Render(fmt.Sprintf(" · %.1f/s so far", pace))
	}
	field("rate", rate)
	if n := op.GetNode(); n != "" {
		if isRunning(op) {
			field("node", n+st.Muted.Render(" runs it; another node takes it over if this one is gone"))
		} else {
			field("node", n+st.Muted.Render(" ran it"))
		}
	}
	who := op.GetPrincipal()
	if r := op.GetRole(); r != "" {
		who += " (" + r + ")"
	}
	field("started", stampText(m.now, op.GetStartedTime())+" · by "+who)
	if f := op.GetFinishedTime(); f != nil {
		field("finished", stampText(m.now, f))
	}
	if op.GetListed() {
		field("selection", plural(int(op.GetMatched()), "dead letter", "dead letters")+", listed by name by its caller")
	} else {
		field("selection", opSelection(op))
	}
	if r := oneLine(op.GetReason()); r != "" {
		field("reason", r)
	} else {
		field("reason", st.Muted.Render("none given"))
	}
	if e := op.GetEdit(); e != nil {
		field("edit", patchWords(e))
	}
	field("audit record", fmt.Sprintf("#%d", op.GetAuditId()))
	if isRunning(op) {
		lines = append(lines, "")
		note := "x cancels it: what it released stays released, the rest stays in the dead-letter queue. " +
			"It runs in the daemon: quitting the console does not stop it."
		for _, l := range strings.Split(ansi.Wordwrap(note, max(m.width-4, 20), " "), "\n") {
			lines = append(lines, "  "+st.Muted.Render(l))
		}
	}
	from := min(c.scroll, max(len(lines)-h, 0))
	return strings.Join(lines[from:], "\n")
}

// stampText is a time in UTC and how long ago it was.
func stampText(now time.Time, t *timestamppb.Timestamp) string {
	return t.AsTime().UTC().Format("2006-01-02 15:04:05 UTC") + " · " + auditAge(now, t) + " ago"
}

// patchWords names the options an edit changes: "max-attempts=8
// start-to-close=30s", in the flags' words.
func patchWords(p *durablev1.OptionsPatch) string {
	var parts []string
	add := func(name, value string) { parts = append(parts, name+"="+value) }
	if p.InitialMs != nil {
		add("initial", shortDur(time.Duration(p.GetInitialMs())*time.Millisecond))
	}
	if p.Backoff != nil {
		add("backoff", strconv.FormatFloat(p.GetBackoff(), 'g', -1, 64))
	}
	if p.MaxIntervalMs != nil {
		add("max-interval", shortDur(time.Duration(p.GetMaxIntervalMs())*time.Millisecond))
	}
	if p.MaxAttempts != nil {
		add("max-attempts", strconv.Itoa(int(p.GetMaxAttempts())))
	}
	if p.NonRetryable != nil {
		add("non-retryable", strings.Join(p.GetNonRetryable().GetValues(), ","))
	}
	if d := p.GetStartToCloseTimeout(); d != nil {
		add("start-to-close", shortDur(d.AsDuration()))
	}
	if d := p.GetHeartbeatTimeout(); d != nil {
		add("heartbeat-timeout", shortDur(d.AsDuration()))
	}
	if d := p.GetScheduleToCloseTimeout(); d != nil {
		add("schedule-to-close", shortDur(d.AsDuration()))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " ")
}
