package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// protoJSON is the one marshaller of proto messages: proto field names in
// lowerCamelCase, as protojson defines them, so scripts see stable names.
var protoJSON = protojson.MarshalOptions{EmitUnpopulated: false}

// printProto writes m as one JSON document.
func printProto(w io.Writer, m proto.Message) error {
	b, err := protoJSON.Marshal(m)
	if err != nil {
		return err
	}
	return printJSON(w, json.RawMessage(b))
}

// rawProto returns m as JSON, to embed in a document of wf's own.
func rawProto(m proto.Message) json.RawMessage {
	b, err := protoJSON.Marshal(m)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

// printJSON writes v as one indented JSON document.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// table returns a writer that aligns tab-separated columns; call Flush.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// row writes cells as one tab-separated line.
func row(w io.Writer, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// dash stands in for an empty cell so columns stay readable.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// human formats a span the way people read it: 850ms, 3.2s, 4m05s, 2h10m, 3d4h.
func human(d time.Duration) string { return client.HumanDuration(d) }

// relative says how far t is from now: "in 3.2s", "4m05s ago", "now".
func relative(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case d > -50*time.Millisecond && d < 50*time.Millisecond:
		return "now"
	case d > 0:
		return "in " + human(d)
	default:
		return human(d) + " ago"
	}
}

// stamp formats an absolute instant, local time, with the date only when it
// is not today.
func stamp(ts *timestamppb.Timestamp, now time.Time) string {
	if ts == nil {
		return "-"
	}
	t := ts.AsTime().Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05.000")
	}
	return t.Format("2006-01-02 15:04:05.000")
}

// stampAgo is stamp followed by the relative time.
func stampAgo(ts *timestamppb.Timestamp, now time.Time) string {
	if ts == nil {
		return "-"
	}
	return stamp(ts, now) + " (" + relative(ts.AsTime(), now) + ")"
}

// preview renders a payload for one table cell: compact JSON when it is JSON,
// else a quoted string, cut to max runes.
func preview(b []byte, max int) string {
	if len(b) == 0 {
		return ""
	}
	var s string
	var buf bytes.Buffer
	if json.Valid(b) && json.Compact(&buf, b) == nil {
		s = buf.String()
	} else if utf8.Valid(b) {
		s = strconv.Quote(string(b))
	} else {
		return fmt.Sprintf("<%d bytes>", len(b))
	}
	return cut(s, max)
}

// cut shortens s to max runes, marking the cut with an ellipsis.
func cut(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// failureText is "Type: message", the way failures read in every table.
func failureText(f *durablev1.Failure) string {
	if f == nil {
		return ""
	}
	s := activity.EscapeID(f.GetType())
	if f.GetMessage() != "" {
		if s != "" {
			s += ": "
		}
		s += f.GetMessage()
	}
	if f.GetNonRetryable() {
		s += " [non-retryable]"
	}
	return s
}

// workflowStatus is the lower-case status: running, completed, failed.
func workflowStatus(s durablev1.WorkflowStatus) string {
	return enumWord(s.String(), "WORKFLOW_STATUS_")
}

// activityState is the lower-case state: scheduled, started, retrying, dead-lettered.
func activityState(s durablev1.ActivityState) string {
	return enumWord(s.String(), "ACTIVITY_STATE_")
}

func enumWord(s, prefix string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, prefix)), "_", "-")
}

// eventName turns EVENT_TYPE_ACTIVITY_TASK_STARTED into ActivityTaskStarted.
func eventName(t durablev1.EventType) string {
	var b strings.Builder
	for _, part := range strings.Split(strings.TrimPrefix(t.String(), "EVENT_TYPE_"), "_") {
		if part == "" {
			continue
		}
		b.WriteString(part[:1])
		b.WriteString(strings.ToLower(part[1:]))
	}
	return b.String()
}

// plural picks the word for n things.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// filterText writes a dead-letter filter in the selection words of
// --select and the console, or "all" when it selects every letter.
func filterText(f *durablev1.DeadLetterFilter) string {
	return selectionText(client.SelectionOfFilter(f))
}

// instantText is an RFC 3339 time in UTC, empty when unset.
func instantText(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}
