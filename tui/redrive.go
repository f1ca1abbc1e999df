package tui

import (
	"fmt"

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

func (r ref) String() string { return r.workflowID + "/" + r.activityID }

// redriveJob is a redrive the console asked for and is waiting on. A bulk
// one is a single call that starts a redrive operation: the daemon releases
// the letters at the console's rate, so that an outage's thousand dead
// letters do not hit the workers as one herd, and answers at once with the
// operation, which the console then follows on the Watch stream. The
// operation goes on without the console.
type redriveJob struct {
	id     int
	refs   []ref
	bulk   bool
	reason string
}

// startRedrive starts redriving what the dialog c confirmed.
func (m Model) startRedrive(c confirm, reason string) (Model, tea.Cmd) {
	m.jobs++
	j := &redriveJob{id: m.jobs, refs: c.refs, bulk: c.bulk, reason: reason}
	m.job, m.flash, m.letter = j, flash{}, nil
	if !j.bulk {
		return m, redriveCmd(m.p.Context, m.p.Backend, j.id, c.refs[0], reason)
	}
	p := RedriveListParams{Reason: reason, PerSecond: m.p.RedrivesPerSecond}
	for _, r := range c.refs {
		p.Refs = append(p.Refs, &durablev1.ActivityRef{WorkflowId: r.workflowID, ActivityId: r.activityID})
	}
	return m, redriveListCmd(m.p.Context, m.p.Backend, j.id, p)
}

// redriveDone ends the job the answer belongs to and says how it went. A
// bulk one's operation is followed from here: its progress has the status
// line until it finishes.
func (m Model) redriveDone(msg redriveDoneMsg) Model {
	j := m.job
	if j == nil || j.id != msg.job {
		return m
	}
	m.job = nil
	switch {
	case !j.bulk && msg.err != nil:
		return m.warn(fmt.Sprintf("redrive of %s failed: %s", j.refs[0], errorText(msg.err)))
	case !j.bulk:
		return m.watchLetter(j.refs[0], j.reason)
	case msg.err != nil:
		// The call may have started an operation whose answer was lost;
		// if so it is on the stream and on the operations screen.
		return m.warn("redrive failed: " + errorText(msg.err))
	case msg.op.GetId() == "":
		return m.warn("redrive started, but the daemon did not say which operation runs it: see 5")
	}
	m.ops.upsert([]*durablev1.Operation{msg.op})
	m.follow = append(m.follow, msg.op.GetId())
	return m.settle()
}

func reasonNote(reason string) string {
	if reason == "" {
		return ""
	}
	return fmt.Sprintf(" · reason %q", reason)
}
