package harness

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tinyllm/durable/demo/sink"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Report is what a kill-loop run did, from the workflow's history and the
// sink's log.
type Report struct {
	WorkflowID string `json:"workflow_id"`
	// Completed is true when the workflow completed (not failed, not stuck).
	Completed bool `json:"completed"`
	// Status is the workflow's final status.
	Status string `json:"status"`
	// Activities is the number of activities the workflow scheduled.
	Activities int `json:"activities"`
	// Attempts counts the attempts history accounts for: the one that
	// finished each activity plus those that ended in a dead letter.
	Attempts int `json:"attempts"`
	// Retries is Attempts minus Activities.
	Retries int `json:"retries"`
	// DeadLetters counts ActivityDeadLettered events.
	DeadLetters int `json:"dead_letters"`
	// EffectsApplied counts the workflow's keys the sink applied.
	EffectsApplied int `json:"effects_applied"`
	// Deliveries counts every delivery of those keys.
	Deliveries int `json:"deliveries"`
	// DuplicateDeliveries counts the deliveries the sink suppressed.
	DuplicateDeliveries int `json:"duplicate_deliveries"`
	// RedeliveredKeys lists the keys delivered more than once.
	RedeliveredKeys []string `json:"redelivered_keys"`
	// MissingKeys lists activities whose effect never reached the sink.
	MissingKeys []string `json:"missing_keys,omitempty"`
	// UnexpectedKeys lists sink keys no scheduled activity owns.
	UnexpectedKeys []string `json:"unexpected_keys,omitempty"`
	// AppliedTwice lists keys applied more than once: always empty unless
	// the sink itself is broken, checked anyway.
	AppliedTwice   []string `json:"applied_twice,omitempty"`
	WorkerKills    int      `json:"worker_kills"`
	DaemonRestarts int      `json:"daemon_restarts"`
	// Nodes is how many durabled nodes served the run, and NodeKills how
	// many times each was SIGKILLed (several nodes only; each kill is
	// counted in DaemonRestarts once the node is back).
	Nodes     int            `json:"nodes"`
	NodeKills map[string]int `json:"node_kills,omitempty"`
	// ReportsAcknowledged counts the activity reports (completions and
	// failures) a daemon acknowledged to a worker; AcknowledgedLost lists
	// those the workflow's record contradicts, which a daemon that lost
	// what it acknowledged would leave.
	ReportsAcknowledged int           `json:"reports_acknowledged"`
	AcknowledgedLost    []string      `json:"acknowledged_lost,omitempty"`
	Elapsed             time.Duration `json:"-"`
	// ElapsedMS is how long the run took, start to close.
	ElapsedMS int64 `json:"elapsed_ms"`
	// ExactlyOnce is true when the workflow completed, every activity's
	// effect was applied exactly once and nothing else was, and no
	// acknowledged report was lost.
	ExactlyOnce bool `json:"exactly_once"`
}

// addAcks counts the acknowledged reports of the workflow and checks them
// against its record (see lostAcks).
func (r *Report) addAcks(id string, acks []Ack, desc *durablev1.DescribeWorkflowResponse) {
	for _, a := range acks {
		if a.WorkflowID == id {
			r.ReportsAcknowledged++
		}
	}
	r.AcknowledgedLost = lostAcks(id, acks, desc)
	if len(r.AcknowledgedLost) > 0 {
		r.ExactlyOnce = false
	}
}

func newReport(id string, wf *durablev1.WorkflowInfo, hist []*durablev1.HistoryEvent, s *sink.Store) *Report {
	r := &Report{
		WorkflowID: id,
		Status:     strings.TrimPrefix(wf.GetStatus().String(), "WORKFLOW_STATUS_"),
		Completed:  wf.GetStatus() == durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED,
	}
	expected := map[string]bool{}
	lastStart := map[string]int32{}
	for _, e := range hist {
		switch e.GetType() {
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			r.Activities++
			expected[id+"/"+e.GetActivityId()] = true
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_STARTED:
			lastStart[e.GetActivityId()] = e.GetAttempt()
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED, durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED:
			r.Attempts += int(lastStart[e.GetActivityId()])
		case durablev1.EventType_EVENT_TYPE_ACTIVITY_DEAD_LETTERED:
			r.DeadLetters++
			r.Attempts += int(e.GetAttempt())
		}
	}
	r.Retries = r.Attempts - r.Activities
	counts := s.Counts(id + "/")
	for k, n := range counts {
		r.Deliveries += n
		if !expected[k] {
			r.UnexpectedKeys = append(r.UnexpectedKeys, k)
			continue
		}
		r.EffectsApplied++
		if n > 1 {
			r.RedeliveredKeys = append(r.RedeliveredKeys, k)
		}
	}
	r.DuplicateDeliveries = r.Deliveries - len(counts)
	for k := range expected {
		if counts[k] == 0 {
			r.MissingKeys = append(r.MissingKeys, k)
		}
	}
	slices.Sort(r.RedeliveredKeys)
	slices.Sort(r.MissingKeys)
	slices.Sort(r.UnexpectedKeys)
	r.ExactlyOnce = r.Completed && len(r.MissingKeys) == 0 && len(r.UnexpectedKeys) == 0 &&
		len(r.AppliedTwice) == 0 && r.EffectsApplied == r.Activities
	return r
}

// WriteTable prints the report as the demo's summary table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	verdict := "OK: every effect applied exactly once"
	switch {
	case len(r.AcknowledgedLost) > 0:
		verdict = "FAILED: a daemon lost reports it acknowledged"
	case !r.ExactlyOnce:
		verdict = "FAILED: effects not applied exactly once"
	case r.Nodes > 1:
		verdict += ", nothing acknowledged lost"
	}
	type row struct {
		k string
		v any
	}
	rows := []row{
		{"workflow", r.WorkflowID + " (" + strings.ToLower(r.Status) + ")"},
		{"activities", r.Activities},
		{"attempts", r.Attempts},
		{"retries", r.Retries},
		{"dead letters", r.DeadLetters},
		{"effects applied", fmt.Sprintf("%d of %d", r.EffectsApplied, r.Activities)},
		{"deliveries", r.Deliveries},
		{"duplicate deliveries suppressed", fmt.Sprintf("%d (%d keys)", r.DuplicateDeliveries, len(r.RedeliveredKeys))},
		{"worker kills (SIGKILL)", r.WorkerKills},
	}
	if r.Nodes > 1 {
		names := slices.Sorted(maps.Keys(r.NodeKills))
		per := make([]string, len(names))
		kills := 0
		for i, n := range names {
			per[i] = fmt.Sprintf("%s %d", n, r.NodeKills[n])
			kills += r.NodeKills[n]
		}
		rows = append(rows,
			row{"nodes", fmt.Sprintf("%d on one PostgreSQL database", r.Nodes)},
			row{"node kills (SIGKILL)", fmt.Sprintf("%d (%s), %d restarted", kills, strings.Join(per, ", "), r.DaemonRestarts)},
			row{"reports acknowledged", fmt.Sprintf("%d, %d lost", r.ReportsAcknowledged, len(r.AcknowledgedLost))})
	} else {
		rows = append(rows, row{"daemon restarts (SIGKILL)", r.DaemonRestarts})
	}
	rows = append(rows, row{"elapsed", r.Elapsed.Round(time.Millisecond)})
	for _, row := range rows {
		fmt.Fprintf(tw, "  %s\t%v\n", row.k, row.v)
	}
	if len(r.MissingKeys) > 0 {
		fmt.Fprintf(tw, "  never applied\t%s\n", strings.Join(r.MissingKeys, " "))
	}
	if len(r.UnexpectedKeys) > 0 {
		fmt.Fprintf(tw, "  unexpected keys\t%s\n", strings.Join(r.UnexpectedKeys, " "))
	}
	for _, l := range r.AcknowledgedLost {
		fmt.Fprintf(tw, "  acknowledged, lost\t%s\n", l)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s\n", verdict)
	return err
}
