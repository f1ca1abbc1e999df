package tui

import (
	"fmt"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// auditColumns give the spare width to what was selected and why; the role
// goes first when the terminal is narrow (the record's detail has it).
var auditColumns = []column{
	{title: "AGE", min: 6},
	{title: "WHO", min: 8, grow: 1},
	{title: "ROLE", min: 8, drop: 1},
	{title: "ACTION", min: 12},
	{title: "COUNT", min: 14},
	{title: "SELECTION", min: 16, grow: 3},
	{title: "REASON", min: 14, grow: 4},
}

// actionName is what an audited RPC did, in the words of the console.
func actionName(rpc string) string {
	switch rpc {
	case "RedriveDeadLetter":
		return "redrive"
	case "RedriveDeadLetters":
		return "bulk redrive"
	case "CancelOperation":
		return "cancel op"
	case "SetPolicyOverride":
		return "policy set"
	case "ClearPolicyOverride":
		return "policy clear"
	}
	return rpc
}

// countText is how many the action touched of how many it matched; "so far"
// while it runs, or for ever if it was cut short.
func countText(r *durablev1.AuditRecord) string {
	s := fmt.Sprintf("%s/%s", thousands(int(r.GetCount())), thousands(int(r.GetMatched())))
	if !r.GetDone() {
		s += " so far"
	}
	return s
}

// selectionText is what an action selected: its filter as wf=… type=…
// fail=…, the one activity, or how many letters it was given and, with
// names, the first of them.
func selectionText(r *durablev1.AuditRecord, names bool) string {
	if o := r.GetPolicyOverride(); o != nil {
		where := "every queue"
		if q := o.GetTaskQueue(); q != "" {
			where = "queue " + activity.EscapeID(q)
		}
		s := activity.EscapeID(o.GetActivityType()) + " on " + where
		if p := o.GetPatch(); p != nil && patchWords(p) != "" {
			if r.GetRpc() == "ClearPolicyOverride" {
				return s + " (it set " + patchWords(p) + ")"
			}
			s += ": " + patchWords(p)
		}
		return s
	}
	if f := r.GetFilter(); f != nil {
		return filterWords(f)
	}
	acts := r.GetActivities()
	if r.GetMatched() <= 1 && len(acts) == 1 {
		return activity.EscapeID(acts[0].GetWorkflowId()) + "/" + activity.EscapeID(acts[0].GetActivityId())
	}
	if !names {
		return plural(int(r.GetMatched()), "dead letter", "dead letters") + ", listed by the caller"
	}
	s := thousands(int(r.GetMatched())) + " listed"
	if len(acts) > 0 {
		refs := make([]ref, 0, min(len(acts), 10))
		for _, a := range acts[:min(len(acts), 10)] {
			refs = append(refs, ref{workflowID: a.GetWorkflowId(), activityID: a.GetActivityId()})
		}
		s += " · " + refsLine(refs, 200)
		if int64(len(refs)) < r.GetMatched() {
			s += ", …"
		}
	}
	return s
}

// opPrefix names the operation an action started or cancelled, to read the
// log beside the operations screen: "op-3 · ".
func opPrefix(r *durablev1.AuditRecord) string {
	if id := r.GetOperationId(); id != "" {
		return id + " · "
	}
	return ""
}

// auditAge is how long ago an action was, in whole seconds at least: the
// log is read for when, not counted down.
func auditAge(now time.Time, t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	d := now.Sub(t.AsTime())
	if d < 10*time.Second {
		return fmt.Sprintf("%ds", max(int(d/time.Second), 0))
	}
	return span(d)
}

func (m Model) auditCells(r *durablev1.AuditRecord) []cell {
	st := m.styles
	reason := cell{text: oneLine(r.GetReason())}
	if reason.text == "" {
		reason = cell{text: "—", style: &st.Muted}
	}
	count := cell{text: countText(r)}
	if !r.GetDone() {
		count.style = &st.Retrying
	}
	return []cell{
		{text: auditAge(m.now, r.GetTime()), style: &st.Muted},
		{text: r.GetPrincipal()},
		{text: r.GetRole(), style: &st.Muted},
		{text: actionName(r.GetRpc())},
		count,
		{text: opPrefix(r) + selectionText(r, true)},
		reason,
	}
}

// auditScreen is the audit log, newest first, with the load's state
// above it.
type auditScreen struct{ list }

// Tab is "audit", without a count: the log is read, not followed whole.
func (c auditScreen) Tab(Model) (name, count string) { return "audit", "" }

// Help lists the audit view's keys.
func (c auditScreen) Help(k KeyMap) (short, full []key.Binding) {
	return []key.Binding{k.Open}, nil
}

// SetSize keeps the cursor on a record and the record on screen.
func (c auditScreen) SetSize(m Model, rows int) Model {
	m.views.audit.list = c.list.clamp(len(m.audit.order), rows)
	return m
}

// Update answers the audit view's keys: enter opens a record.
func (c auditScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	if l, ok := m.moveList(c.list, msg, len(m.audit.order)); ok {
		m.views.audit.list = l
		return m, nil, true
	}
	if key.Matches(msg, m.keys.Open) && c.cursor < len(m.audit.order) {
		m = m.openFrom(screenAuditRecord)
		m.views.auditRecord = auditRecordScreen{id: m.audit.order[c.cursor].GetId()}
		return m, nil, true
	}
	return m, nil, false
}

// View is the records on screen.
func (c auditScreen) View(m Model, h int) string {
	st := m.styles
	a := m.audit
	var lines []string
	if a.err != "" {
		lines = append(lines, st.Warning.Render("  could not read the audit log: "+a.err))
	}
	switch {
	case len(a.order) == 0 && a.loading:
		lines = append(lines, "", "  "+st.Muted.Render("reading the audit log…"))
	case len(a.order) == 0 && a.loaded:
		lines = append(lines, "", "  "+st.Muted.Render("no operator actions recorded yet: every redrive (r or R on the dead letters"),
			"  "+st.Muted.Render("view, or wf dlq redrive) lands here with who, when, what and why"))
	case len(a.order) > 0:
		shown, widths := layout(auditColumns, m.width)
		l := c.list
		lines = append(lines, renderHeader(st, auditColumns, shown, widths))
		rows := max(h-len(lines), 1)
		// The error line above the table takes a row the cursor's
		// bookkeeping does not know of.
		offset := max(l.offset, l.cursor-rows+1)
		end := min(offset+rows, len(a.order))
		for i := offset; i < end; i++ {
			lines = append(lines, renderRow(st, m.auditCells(a.order[i]), shown, widths, i == l.cursor))
		}
	}
	return strings.Join(lines, "\n")
}

// auditRecordScreen is one audit record in full, live as the record is
// updated (a bulk redrive's record counts up as it goes).
type auditRecordScreen struct {
	id     int64
	scroll int
}

// Help lists the record's keys.
func (c auditRecordScreen) Help(k KeyMap) (short, full []key.Binding) {
	return []key.Binding{k.Back, k.Up, k.Down}, nil
}

// SetSize: the view keeps the scroll within the record.
func (c auditRecordScreen) SetSize(m Model, _ int) Model { return m }

// Update scrolls, and esc goes back to the log.
func (c auditRecordScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	if key.Matches(msg, m.keys.Back) {
		return m.goBack(), nil, true
	}
	if s, ok := m.scrollBy(c.scroll, msg); ok {
		m.views.auditRecord.scroll = s
		return m, nil, true
	}
	return m, nil, false
}

// View is the record in full, with the activities it touched.
func (c auditRecordScreen) View(m Model, h int) string {
	st := m.styles
	r := m.audit.byID[c.id]
	if r == nil {
		return "\n  " + st.Muted.Render("this record is no longer kept")
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
	lines = append(lines, st.Title.Render(fmt.Sprintf("audit record #%d · %s", r.GetId(), actionName(r.GetRpc()))), "")
	when := ""
	if t := r.GetTime(); t != nil {
		when = t.AsTime().UTC().Format("2006-01-02 15:04:05 UTC") + " · " + auditAge(m.now, t) + " ago"
	}
	field("when", when)
	who := r.GetPrincipal()
	if role := r.GetRole(); role != "" {
		who += " · " + role
	}
	field("who", who)
	field("call", r.GetRpc())
	if id := r.GetOperationId(); id != "" {
		field("operation", id+st.Muted.Render(" (5 lists the operations)"))
	}
	field("selection", selectionText(r, false))
	count := fmt.Sprintf("%s of %s matched", thousands(int(r.GetCount())), thousands(int(r.GetMatched())))
	if r.GetDone() {
		count += " · done"
	} else {
		count += " · " + st.Retrying.Render("not finished: still running, or cut short by its caller or a restart")
	}
	field("count", count)
	if reason := r.GetReason(); reason != "" {
		field("reason", oneLine(reason))
	} else {
		field("reason", st.Muted.Render("none given"))
	}
	if r.GetPolicyOverride() != nil {
		// An override names no activities.
		from := min(c.scroll, max(len(lines)-h, 0))
		return strings.Join(lines[from:], "\n")
	}
	lines = append(lines, "")
	label := "activities"
	for _, a := range r.GetActivities() {
		field(label, activity.EscapeID(a.GetWorkflowId())+"/"+activity.EscapeID(a.GetActivityId()))
		label = ""
	}
	switch n := int64(len(r.GetActivities())); {
	case n == 0:
		field(label, st.Muted.Render("none yet"))
	case n < r.GetCount():
		field(label, st.Muted.Render(fmt.Sprintf("… and %s more (a record names the first %d)", thousands(int(r.GetCount()-n)), n)))
	}
	from := min(c.scroll, max(len(lines)-h, 0))
	return strings.Join(lines[from:], "\n")
}
