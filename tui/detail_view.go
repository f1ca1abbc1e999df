package tui

import (
	"fmt"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// recentHistory is how many of the workflow's last events the detail shows.
const recentHistory = 12

// detailScreen is the selected activity in full. It reads the live
// activity, so countdowns and heartbeats move while it is open, and once
// the activity finishes, how it ended.
type detailScreen struct{ detail }

// Help lists the detail pane's keys.
func (c detailScreen) Help(k KeyMap) (short, full []key.Binding) {
	short = []key.Binding{k.Back, k.Up, k.Down, k.Redrive, k.Timeline}
	return short, append(append([]key.Binding{}, short...), k.withReason(), k.Override, k.Copy)
}

// SetSize: the view keeps the scroll within the pane.
func (c detailScreen) SetSize(m Model, _ int) Model { return m }

// Update scrolls, redrives a dead letter, sets a policy override (p),
// opens the workflow's timeline and copies the activity's id.
func (c detailScreen) Update(m Model, msg tea.KeyMsg) (Model, tea.Cmd, bool) {
	k := m.keys
	if key.Matches(msg, k.Back) {
		return m.goBack(), nil, true
	}
	if s, ok := m.scrollBy(c.scroll, msg); ok {
		m.views.detail.scroll = s
		return m, nil, true
	}
	a := m.detailActivity()
	switch {
	case a == nil:
		return m, nil, false
	case key.Matches(msg, k.Redrive):
		if isDead(a) {
			return m.askRedriveOf(a), nil, true
		}
		return m, nil, true
	case key.Matches(msg, k.Override):
		m, cmd := m.askOverride()
		return m, cmd, true
	case key.Matches(msg, k.Timeline):
		m, cmd := m.openTimeline(a.GetWorkflowId())
		return m, cmd, true
	case key.Matches(msg, k.Copy):
		m, cmd := m.copyID(activityRef(a.GetWorkflowId(), a.GetActivityId()))
		return m, cmd, true
	}
	return m, nil, false
}

// Urgent reports whether the activity's countdown shows tenths.
func (c detailScreen) Urgent(m Model, _ int) bool {
	a := m.detailActivity()
	return a != nil && waitOf(a, m.now).urgent
}

// View is the activity in full, from the scroll down.
func (c detailScreen) View(m Model, h int) string {
	a := m.detailActivity()
	if a == nil {
		return ""
	}
	lines := m.detailLines(a)
	from := min(c.scroll, max(len(lines)-h, 0))
	return strings.Join(lines[from:], "\n")
}

func (m Model) detailLines(a *durablev1.PendingActivity) []string {
	st := m.styles
	var lines []string
	// Values wrap under themselves rather than running off a narrow terminal.
	wrapAt := max(m.width-16, 20)
	more := func(value string) {
		for _, l := range strings.Split(ansi.Wordwrap(value, wrapAt, " ·,"), "\n") {
			lines = append(lines, strings.Repeat(" ", 15)+l)
		}
	}
	field := func(label, value string) {
		wrapped := strings.Split(ansi.Wordwrap(value, wrapAt, " ·,"), "\n")
		lines = append(lines, st.Label.Render(fmt.Sprintf("  %-13s", label))+wrapped[0])
		for _, l := range wrapped[1:] {
			lines = append(lines, strings.Repeat(" ", 15)+l)
		}
	}

	title := fmt.Sprintf("%s / %s %s", activity.EscapeID(a.GetWorkflowId()), activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType()))
	fin := m.detailFinished()
	if _, live := m.st.acts[m.views.detail.key]; !live {
		if fin != nil {
			title += st.Muted.Render(fmt.Sprintf("  (finished: %s %s)", finishedWord(fin.GetOutcome()), age(m.now, fin.GetFinishedTime())))
		} else {
			title += st.Muted.Render("  (no longer pending: completed or failed)")
		}
	}
	if !m.views.detail.loading && m.views.detail.historyErr == "" {
		title += st.Muted.Render(fmt.Sprintf("  · %d events in history, the last below", len(m.views.detail.history)))
	}
	lines = append(lines, st.Title.Render(title), "")

	w := waitOf(a, m.now)
	state := st.state(a.GetState()).Render(stateName(a.GetState())) +
		fmt.Sprintf(" · attempt %d of %d", a.GetAttempt(), a.GetMaxAttempts())
	switch {
	case fin != nil:
		// Nothing is due any more: say how it ended instead.
		state = finishedWord(fin.GetOutcome()) + fmt.Sprintf(" · after attempt %d of %d", a.GetAttempt(), a.GetMaxAttempts())
	case w.stuck && a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		state += " · lease expired " + strings.TrimPrefix(w.countdown, "overdue ") + " ago"
	case w.countdown != "" && a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		state += " · lease ends in " + w.countdown
	case w.countdown != "":
		state += " · next try " + strings.TrimPrefix(w.countdown+" ", "due now ") + "(" + w.reason + ")"
	}
	field("state", state)
	field("key", activity.EscapeID(a.GetIdempotencyKey()))
	queue := activity.EscapeID(a.GetTaskQueue())
	if id := activity.EscapeID(a.GetLastWorkerIdentity()); id != "" {
		queue += " · last worker " + id
	}
	if a.GetRedrives() > 0 {
		queue += fmt.Sprintf(" · redriven %d×", a.GetRedrives())
	}
	field("queue", queue)
	mark := m.overrideMarks(a)
	in := activity.OptionsInForce(a)
	field("retry policy", policyLine(in.GetRetryPolicy(), a.GetMaxAttempts(), mark))
	field("timeouts", timeoutsLine(in, mark))
	if fin == nil {
		field("schedule", retrySchedule(a, m.now))
	}
	if t := a.GetExpirationTime(); t != nil && fin == nil {
		field("budget", "schedule-to-close runs out in "+span(t.AsTime().Sub(m.now)))
	}

	lines = append(lines, "")
	if f := a.GetLastFailure(); f != nil {
		msg := strings.Split(strings.TrimRight(f.GetMessage(), "\n"), "\n")
		head := activity.EscapeID(f.GetType())
		if head != "" && msg[0] != "" {
			head += ": "
		}
		field("last failure", st.Failed.Render(head+msg[0]))
		for _, l := range msg[1:] {
			more(st.Failed.Render(l))
		}
		if f.GetNonRetryable() {
			more("non-retryable")
		}
		for _, l := range pretty(f.GetDetails()) {
			more(st.Muted.Render(l))
		}
	} else {
		field("last failure", st.Muted.Render("none"))
	}
	if t := a.GetLastHeartbeatTime(); t != nil || len(a.GetHeartbeatDetails()) > 0 {
		field("heartbeat", age(m.now, t))
		for _, l := range pretty(a.GetHeartbeatDetails()) {
			more(l)
		}
	}

	lines = append(lines, "")
	trail := a.GetAttempts()
	label := "attempts"
	if a.GetAttemptsTruncated() > 0 {
		more(st.Muted.Render(fmt.Sprintf("(%d earlier attempts not kept)", a.GetAttemptsTruncated())))
	}
	for _, r := range trail {
		field(label, m.attemptLine(r, fin))
		label = ""
	}
	if len(trail) == 0 {
		field(label, st.Muted.Render("not started yet"))
	}

	lines = append(lines, "")
	switch {
	case m.views.detail.loading:
		field("history", st.Muted.Render("loading…"))
	case m.views.detail.historyErr != "":
		field("history", st.Warning.Render(m.views.detail.historyErr))
	default:
		events := m.views.detail.history
		label := "history"
		if len(events) > recentHistory {
			label = fmt.Sprintf("last %d of %d", recentHistory, len(events))
			events = events[len(events)-recentHistory:]
		}
		var origin time.Time
		if len(m.views.detail.history) > 0 {
			origin = m.views.detail.history[0].GetTime().AsTime()
		}
		for _, e := range events {
			field(label, eventLine(e, origin))
			label = ""
		}
	}
	return lines
}

// attemptLine is one attempt of the activity in the detail; fin is how the
// activity finished, nil while it is pending.
func (m Model) attemptLine(r *durablev1.AttemptRecord, fin *durablev1.FinishedActivity) string {
	s := fmt.Sprintf("#%d", r.GetAttempt())
	if id := activity.EscapeID(r.GetIdentity()); id != "" {
		s += " " + id
	}
	if t := r.GetStartedTime(); t != nil {
		s += " · started " + age(m.now, t)
		switch e := r.GetEndedTime(); {
		case e != nil:
			s += " · ran " + span(e.AsTime().Sub(t.AsTime()))
		case fin != nil:
			s += " · cut off when the workflow closed"
		default:
			s += " · running"
		}
	}
	if f := r.GetFailure(); f != nil {
		s += " · " + m.styles.Failed.Render(failureLine(f))
	} else if r.GetEndedTime() != nil && fin != nil {
		s += " · completed"
	}
	return s
}

// detailFinished is how the activity in the detail finished, once it has
// and the daemon has said.
func (m Model) detailFinished() *durablev1.FinishedActivity {
	if _, live := m.st.acts[m.views.detail.key]; live {
		return nil
	}
	return m.views.detail.finished
}

// finishedWord says how an activity finished, as the detail's title reads.
func finishedWord(outcome string) string {
	if outcome == "workflow_closed" {
		return "its workflow closed"
	}
	return outcome
}

// overrideMarks returns what to write after each field of the policy in
// force: nothing for a field from the code, "(override by ops: "why")" for
// the first field a policy override sets and "(override)" for the others.
func (m Model) overrideMarks(a *durablev1.PendingActivity) func(field string) string {
	overridden := map[string]bool{}
	for _, f := range a.GetOverriddenFields() {
		overridden[f] = true
	}
	o := client.OverrideFor(m.st.overrides, a.GetActivityType(), a.GetTaskQueue())
	said := false
	return func(field string) string {
		if !overridden[field] {
			return ""
		}
		text := "(override)"
		if !said && o != nil {
			said = true
			text = "(override by " + o.GetPrincipal()
			if r := o.GetReason(); r != "" {
				text += fmt.Sprintf(": %q", ansi.Truncate(r, 60, "…"))
			}
			text += ")"
		}
		return " " + m.styles.Retrying.Render(text)
	}
}

func policyLine(p *durablev1.RetryPolicy, maxAttempts int32, mark func(string) string) string {
	s := fmt.Sprintf("initial %s%s · backoff ×%g%s · max interval %s%s",
		shortDur(activity.Backoff(p, 1)), mark("retry_policy.initial_ms"),
		effectiveFactor(p), mark("retry_policy.backoff"),
		shortDur(activity.Backoff(p, 1000)), mark("retry_policy.max_interval_ms"))
	if maxAttempts <= 0 {
		maxAttempts = p.GetMaxAttempts()
	}
	if maxAttempts > 0 {
		s += fmt.Sprintf(" · max attempts %d%s", maxAttempts, mark("retry_policy.max_attempts"))
	}
	if nr := p.GetNonRetryable(); len(nr) > 0 {
		s += " · never retried: " + strings.Join(nr, ", ") + mark("retry_policy.non_retryable")
	} else if m := mark("retry_policy.non_retryable"); m != "" {
		s += " · every failure retried" + m
	}
	return s
}

func effectiveFactor(p *durablev1.RetryPolicy) float64 {
	if f := p.GetBackoff(); f >= 1 {
		return f
	}
	return activity.DefaultBackoff
}

// shortDur prints whole units without trailing zeros: 1s, 1m, 1m30s, 250ms.
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func timeoutsLine(o *durablev1.ActivityOptions, mark func(string) string) string {
	d := func(p *durationpb.Duration) string {
		if p == nil || p.AsDuration() <= 0 {
			return "—"
		}
		return shortDur(p.AsDuration())
	}
	return fmt.Sprintf("start-to-close %s%s · heartbeat %s%s · schedule-to-start %s · schedule-to-close %s%s",
		d(o.GetStartToCloseTimeout()), mark("start_to_close_timeout"), d(o.GetHeartbeatTimeout()), mark("heartbeat_timeout"),
		d(o.GetScheduleToStartTimeout()), d(o.GetScheduleToCloseTimeout()), mark("schedule_to_close_timeout"))
}

// retrySchedule tells when the activity tries again and when it gives up. The
// times after the next are upper bounds: the daemon draws a full jitter below
// each backoff, and an attempt's own run time comes on top.
func retrySchedule(a *durablev1.PendingActivity, now time.Time) string {
	return client.RetryScheduleOf(a, now).Words(span)
}
