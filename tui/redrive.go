package tui

import (
	"fmt"
	"strings"
	"time"

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
// the key was pressed, so what runs is exactly what the count said.
type confirm struct {
	refs []ref
	what string // "order-42 / 3 ChargeCard" or "matching fail:Timeout"
}

// redriveJob releases redrives at a steady rate rather than all at once, so
// that an outage's thousand dead letters do not hit the workers as one herd.
type redriveJob struct {
	id       int
	refs     []ref
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
	m.confirm = &confirm{refs: refs, what: what}
	return m
}

// answerConfirm handles the key pressed in the dialog: y starts the redrive,
// anything else cancels.
func (m Model) answerConfirm(msg tea.KeyMsg) (Model, tea.Cmd) {
	c := m.confirm
	m.confirm = nil
	if msg.String() != "y" {
		m.flash = "redrive cancelled"
		return m, nil
	}
	id := 1
	if m.job != nil {
		id = m.job.id + 1
	}
	m.job = &redriveJob{id: id, refs: c.refs, started: m.now}
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
		cmds = append(cmds, redriveCmd(m.p.Context, m.p.Backend, j.id, j.refs[j.next]))
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
