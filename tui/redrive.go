package tui

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
// letters do not hit the workers as one herd, and writes one audit record;
// the job ends when the daemon answers with the operation, which goes on
// without the console.
type redriveJob struct {
	id      int
	refs    []ref
	bulk    bool
	reason  string
	started time.Time
	// pending are the letters not yet seen leaving the dead-letter queue.
	pending  map[string]bool
	cancel   context.CancelFunc
	stopping bool // the operator stopped it; the call is winding down
}

// startRedrive starts redriving what the dialog c confirmed.
func (m Model) startRedrive(c confirm, reason string) (Model, tea.Cmd) {
	m.jobs++
	j := &redriveJob{id: m.jobs, refs: c.refs, bulk: c.bulk, reason: reason, started: m.now,
		pending: make(map[string]bool, len(c.refs))}
	for _, r := range c.refs {
		j.pending[activityKey(r.workflowID, r.activityID)] = true
	}
	m.job, m.flash = j, flash{}
	if !j.bulk {
		return m, redriveCmd(m.p.Context, m.p.Backend, j.id, c.refs[0], reason)
	}
	ctx, cancel := context.WithTimeout(m.p.Context, callTimeout)
	j.cancel = cancel
	p := RedriveListParams{Reason: reason, PerSecond: m.p.RedrivesPerSecond}
	for _, r := range c.refs {
		p.Refs = append(p.Refs, &durablev1.ActivityRef{WorkflowId: r.workflowID, ActivityId: r.activityID})
	}
	return m, redriveListCmd(ctx, m.p.Backend, j.id, p)
}

// stopRedrive ends a running bulk redrive: the daemon stops releasing
// letters when the call ends, and its audit record keeps the count reached.
func (m Model) stopRedrive() Model {
	if j := m.job; j != nil && j.bulk && !j.stopping {
		j.stopping = true
		j.cancel()
	}
	return m
}

// observe counts the letters of the job that an event shows out of the
// dead-letter queue: redriven (any state but dead-lettered) or gone.
func (j *redriveJob) observe(ev *durablev1.WatchEvent, st *state) {
	if j == nil || len(j.pending) == 0 {
		return
	}
	switch ev.GetKind() {
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT:
		for _, a := range ev.GetActivities() {
			if k := keyOf(a); j.pending[k] && !isDead(a) {
				delete(j.pending, k)
			}
		}
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE:
		for _, r := range ev.GetRemoved() {
			delete(j.pending, activityKey(r.GetWorkflowId(), r.GetActivityId()))
		}
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE:
		// After a reconnection the snapshot is the truth; what changed
		// while the stream was down shows up here.
		for k := range j.pending {
			if a, ok := st.acts[k]; !ok || !isDead(a) {
				delete(j.pending, k)
			}
		}
	}
}

// seen is how many of the job's letters have left the dead-letter queue.
func (j *redriveJob) seen() int { return len(j.refs) - len(j.pending) }

// redriveDone ends the job the answer belongs to and says how it went.
func (m Model) redriveDone(msg redriveDoneMsg) Model {
	j := m.job
	if j == nil || j.id != msg.job {
		return m
	}
	m.job = nil
	if j.cancel != nil {
		j.cancel()
	}
	switch {
	case !j.bulk && msg.err != nil:
		return m.warn(fmt.Sprintf("redrive of %s failed: %s", j.refs[0], errorText(msg.err)))
	case !j.bulk:
		return m.say("redrove " + j.refs[0].String() + reasonNote(j.reason))
	case j.stopping && isCanceled(msg.err):
		return m.warn(fmt.Sprintf("redrive stopped: %s of %s back in their queues; the audit log keeps how far it got",
			thousands(j.seen()), thousands(len(j.refs))))
	case msg.err != nil:
		text := "redrive failed: " + errorText(msg.err)
		if n := j.seen(); n > 0 {
			text += fmt.Sprintf(" · %s of %s were back in their queues", thousands(n), thousands(len(j.refs)))
		}
		return m.warn(text)
	}
	op := msg.op
	return m.say(fmt.Sprintf("started %s: redriving %s at %s/s · audit record #%d%s",
		op.GetId(), plural(int(op.GetMatched()), "dead letter", "dead letters"),
		strconv.FormatFloat(op.GetRate(), 'f', -1, 64), op.GetAuditId(), reasonNote(j.reason)))
}

func reasonNote(reason string) string {
	if reason == "" {
		return ""
	}
	return fmt.Sprintf(" · reason %q", reason)
}

func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled
}

// progressLine is the live progress of a bulk redrive: the letters seen back
// in their queues, and the time left at the pace seen so far.
func (j *redriveJob) progressLine(width int, now time.Time) string {
	total, seen := len(j.refs), j.seen()
	barW := min(20, max(width/5, 5))
	filled := 0
	if total > 0 {
		filled = seen * barW / total
	}
	bar := "[" + strings.Repeat("#", filled) + strings.Repeat("-", barW-filled) + "]"
	s := fmt.Sprintf("redriving %s %s/%s back in their queues", bar, thousands(seen), thousands(total))
	elapsed := now.Sub(j.started)
	switch {
	case j.stopping:
		s += " · stopping…"
	case seen == total:
		s += " · finishing"
	case seen > 0 && elapsed > 0:
		left := time.Duration(float64(elapsed) * float64(total-seen) / float64(seen))
		s += " · ~" + span(left) + " left · x stops"
	default:
		s += " · x stops"
	}
	return s
}
