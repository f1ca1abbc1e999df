package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// ref names one dead letter to redrive.
type ref struct {
	workflowID string
	activityID string
}

func refOf(a *durablev1.PendingActivity) ref {
	return ref{workflowID: a.GetWorkflowId(), activityID: a.GetActivityId()}
}

// confirm is the dialog before a redrive: it fixes the targets at the moment
// the key was pressed, so what runs is exactly what the count said. y goes
// ahead at once without a reason (as scripts expect); e opens a line for one.
type confirm struct {
	refs    []ref
	what    string // "order-42 / 3 ChargeCard" or "every dead letter failing with Timeout"
	editing bool   // the reason line has the keyboard
	reason  textinput.Model
}

// maxReason bounds the reason typed in the dialog; the daemon takes more,
// but a reason is a line in the audit log, not a report.
const maxReason = 300

// redriveJob releases redrives at a steady rate rather than all at once, so
// that an outage's thousand dead letters do not hit the workers as one herd.
type redriveJob struct {
	id       int
	refs     []ref
	reason   string
	next     int // refs[:next] were sent
	inflight int
	done     int
	failed   int
	lastErr  string
	started  time.Time
}

// maxInflight caps concurrent redrive calls when the daemon is slow.
const maxInflight = 8

func (j *redriveJob) finished() bool { return j.done+j.failed == len(j.refs) }

// askRedrive opens the confirmation for refs, or says why there is nothing to do.
func (m Model) askRedrive(refs []ref, what string) Model {
	if len(refs) == 0 {
		m.flash = "nothing to redrive"
		return m
	}
	if m.job != nil && !m.job.finished() {
		m.flash = "a redrive is still running"
		return m
	}
	in := textinput.New()
	in.Prompt = "reason: "
	in.Placeholder = "e.g. INC-7, gateway is back"
	in.CharLimit = maxReason
	in.Width = reasonWidth(m.width)
	in.PromptStyle = m.styles.Label
	in.Cursor.SetMode(cursor.CursorStatic)
	m.confirm = &confirm{refs: refs, what: what, reason: in}
	return m
}

// answerConfirm handles a key pressed in the dialog. Without the reason line:
// y starts the redrive, e opens the reason line, anything else cancels. With
// it: enter starts the redrive with the reason, esc cancels, the rest is
// typing.
func (m Model) answerConfirm(msg tea.KeyMsg) (Model, tea.Cmd) {
	c := *m.confirm
	k := m.keys
	if c.editing {
		switch {
		case key.Matches(msg, k.Submit):
			return m.startRedrive(c.refs, strings.TrimSpace(c.reason.Value()))
		case key.Matches(msg, k.Cancel):
			return m.cancelConfirm(), nil
		}
		var cmd tea.Cmd
		c.reason, cmd = c.reason.Update(msg)
		m.confirm = &c
		return m, cmd
	}
	switch {
	case key.Matches(msg, k.Confirm):
		return m.startRedrive(c.refs, "")
	case key.Matches(msg, k.EditReason):
		c.editing = true
		cmd := c.reason.Focus()
		m.confirm = &c
		return m, cmd
	}
	return m.cancelConfirm(), nil
}

// reasonWidth is how much of the reason the dialog shows: its text width less
// the prompt and the cursor.
func reasonWidth(termWidth int) int {
	return max(dialogWidth(termWidth)-len("reason: ")-1, 1)
}

func (m Model) cancelConfirm() Model {
	m.confirm = nil
	m.flash = "redrive cancelled"
	return m
}

// startRedrive closes the dialog and starts redriving refs.
func (m Model) startRedrive(refs []ref, reason string) (Model, tea.Cmd) {
	m.confirm = nil
	id := 1
	if m.job != nil {
		id = m.job.id + 1
	}
	m.job = &redriveJob{id: id, refs: refs, reason: reason, started: m.now}
	m.flash = ""
	return m.releaseRedrive()
}

// releaseRedrive sends the next redrive if the bucket allows and schedules the
// one after; the first goes at once.
func (m Model) releaseRedrive() (Model, tea.Cmd) {
	j := m.job
	if j == nil || j.next >= len(j.refs) {
		return m, nil
	}
	var cmds []tea.Cmd
	if j.inflight < maxInflight {
		cmds = append(cmds, redriveCmd(m.p.Context, m.p.Backend, j.id, j.refs[j.next], j.reason))
		j.next++
		j.inflight++
	}
	if j.next < len(j.refs) {
		cmds = append(cmds, redriveTickCmd(time.Second/time.Duration(m.p.RedrivesPerSecond), j.id))
	}
	return m, tea.Batch(cmds...)
}

func (m Model) redriveResult(msg redriveResultMsg) Model {
	j := m.job
	if j == nil || j.id != msg.job {
		return m
	}
	j.inflight--
	if msg.err != nil {
		j.failed++
		j.lastErr = fmt.Sprintf("%s/%s: %v", msg.ref.workflowID, msg.ref.activityID, msg.err)
	} else {
		j.done++
	}
	if j.finished() {
		m.flash = fmt.Sprintf("redrove %s", plural(j.done, "dead letter", "dead letters"))
		if j.failed > 0 {
			m.flash += fmt.Sprintf(", %d failed (last: %s)", j.failed, j.lastErr)
		}
	}
	return m
}

// progressLine is the live progress of a bulk redrive.
func (j *redriveJob) progressLine(width int, rate int) string {
	total := len(j.refs)
	sent := j.done + j.failed
	barW := min(20, max(width/5, 5))
	filled := 0
	if total > 0 {
		filled = sent * barW / total
	}
	bar := "[" + strings.Repeat("#", filled) + strings.Repeat("-", barW-filled) + "]"
	left := time.Duration(total-j.next) * time.Second / time.Duration(rate)
	s := fmt.Sprintf("redriving %s %s/%s", bar, thousands(sent), thousands(total))
	if j.failed > 0 {
		s += fmt.Sprintf(" · %d failed", j.failed)
	}
	if left > 0 {
		s += " · ~" + span(left) + " left"
	}
	return s
}
