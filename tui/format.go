package tui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func stateName(s durablev1.ActivityState) string {
	switch s {
	case durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED:
		return "scheduled"
	case durablev1.ActivityState_ACTIVITY_STATE_STARTED:
		return "running"
	case durablev1.ActivityState_ACTIVITY_STATE_RETRYING:
		return "retrying"
	case durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED:
		return "dead-lettered"
	}
	return "unknown"
}

// shortStateName is the state in a narrow column.
func shortStateName(s durablev1.ActivityState) string {
	if s == durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED {
		return "dead"
	}
	return stateName(s)
}

func statusName(s durablev1.WorkflowStatus) string {
	switch s {
	case durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING:
		return "running"
	case durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED:
		return "completed"
	case durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED:
		return "failed"
	}
	return "unknown"
}

// eventName turns EVENT_TYPE_ACTIVITY_TASK_SCHEDULED into ActivityTaskScheduled.
func eventName(t durablev1.EventType) string {
	name := strings.TrimPrefix(t.String(), "EVENT_TYPE_")
	var b strings.Builder
	for _, w := range strings.Split(name, "_") {
		if w == "" {
			continue
		}
		b.WriteString(w[:1])
		b.WriteString(strings.ToLower(w[1:]))
	}
	return b.String()
}

// span formats a non-negative duration compactly: tenths under ten seconds
// (so a countdown visibly moves), then 42s, 3m05s, 2h07m, 3d04h.
func span(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", float64(d/(100*time.Millisecond))/10)
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// age formats how long ago t was, or "" when t is unset.
func age(now time.Time, t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return span(now.Sub(t.AsTime())) + " ago"
}

// wait says what an activity is waiting for and until when, from the absolute
// times the daemon sent and the console's clock.
type wait struct {
	countdown string // "4.2s", "due now", "" when nothing is due
	reason    string // "backoff", "no worker polling", "lease", "redrive"
	urgent    bool   // under ten seconds: the console ticks faster
	stuck     bool   // due and nobody is taking it
}

// shortReason is the reason in a narrow column.
func (w wait) shortReason() string {
	switch w.reason {
	case "no worker polling":
		return "no worker"
	case "lease expired":
		return "expired"
	}
	return ""
}

func waitOf(a *durablev1.PendingActivity, now time.Time) wait {
	n := client.NextOf(a, now)
	switch n.Kind {
	case client.NextBackoff:
		return wait{countdown: span(n.Left), reason: "backoff", urgent: n.Left < 10*time.Second}
	case client.NextDue:
		if n.At.IsZero() {
			return wait{reason: "queued"}
		}
		return wait{countdown: "due now", reason: "queued", urgent: true}
	case client.NextOverdue:
		// Counted from when it fell due: that is how long the work has
		// been late.
		return wait{countdown: "overdue " + span(n.Late()), reason: "no worker polling", urgent: n.Late() < 10*time.Second, stuck: true}
	case client.NextRunning:
		if n.At.IsZero() {
			return wait{reason: "lease"}
		}
		return wait{countdown: span(n.Left), reason: "lease", urgent: n.Left < 10*time.Second}
	case client.NextLeaseExpired:
		return wait{countdown: "overdue " + span(n.Late()), reason: "lease expired", urgent: n.Late() < 10*time.Second, stuck: true}
	case client.NextDeadLettered:
		return wait{reason: "redrive"}
	}
	return wait{}
}

// failureLine is "Type: message" on one line.
func failureLine(f *durablev1.Failure) string {
	if f == nil {
		return ""
	}
	msg, typ := oneLine(f.GetMessage()), activity.EscapeID(f.GetType())
	switch {
	case typ == "":
		return msg
	case msg == "":
		return typ
	}
	return typ + ": " + msg
}

// oneLine squeezes whitespace runs (newlines included) into single spaces and
// drops control characters, so a payload cannot break the table.
func oneLine(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if !unicode.IsPrint(r) {
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// preview shows bytes on one line: compact JSON when it is JSON, the text when
// it is printable, a size otherwise.
func preview(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if json.Valid(b) {
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			return oneLine(buf.String())
		}
	}
	if isText(b) {
		return oneLine(string(b))
	}
	return fmt.Sprintf("<%d bytes>", len(b))
}

// pretty shows bytes over several lines: indented JSON when it is JSON, the
// text when it is printable, a hex dump head otherwise.
func pretty(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		var buf bytes.Buffer
		if json.Indent(&buf, b, "", "  ") == nil {
			return strings.Split(buf.String(), "\n")
		}
	}
	if isText(b) {
		return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	}
	n := min(len(b), 32)
	return []string{fmt.Sprintf("<%d bytes> % x…", len(b), b[:n])}
}

func isText(b []byte) bool {
	for _, r := range string(b) {
		if r == unicode.ReplacementChar || (!unicode.IsPrint(r) && !unicode.IsSpace(r)) {
			return false
		}
	}
	return true
}

// errorText is an error as an operator reads it: a gRPC status as its code
// in words and its message ("permission denied: principal …"), without the
// "rpc error: code = … desc = …" framing.
func errorText(err error) string {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		s := se.GRPCStatus()
		return codeWords(s.Code()) + ": " + oneLine(s.Message())
	}
	return oneLine(err.Error())
}

// codeWords turns PermissionDenied into "permission denied".
func codeWords(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte(' ')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// plural formats "1 dead letter" / "3 dead letters".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%s %s", thousands(n), many)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 || len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	b.WriteString(s[:pre])
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// filterWords is what a dead-letter filter selects, in the words of the
// filter bar and wf --select ("type:Timeout wf:order-42"), or "every dead
// letter" for the empty one.
func filterWords(f *durablev1.DeadLetterFilter) string {
	if w := client.SelectionOfFilter(f).String(); w != "" {
		return w
	}
	return "every dead letter"
}
