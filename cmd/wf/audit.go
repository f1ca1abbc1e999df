package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const auditUsage = `
Usage: wf audit [--since DUR] [--limit N]

Lists the daemon's audit log, newest first: every redrive, single or bulk,
Lists the daemon's audit log, newest first: every redrive, single or bulk,
every cancel of an operation and every policy override set or cleared ('wf
policy'), with its id (the one 'wf dlq redrive --all' prints), who made it
(the principal of the token or certificate, and its role; "local" when
durabled runs without --auth), when, what it selected (or the override), how
many letters went out of how many matched, any edit of their options (in
--json), and the reason given with --reason.

The record is written in the same transaction as the action, so the log
neither misses a redrive nor shows one that did not happen. A bulk redrive
is a redrive operation (ACTION names it, e.g. "bulk redrive op-3") and one
record that counts letters as the daemon releases them; COUNT says
"unfinished" while it runs. A cancel is a record of its own, with the
letters it kept in the dead-letter queue ("kept 180/300"), and the
operation's record ends at the count it reached ("120/300").

Examples:
  wf audit
  wf audit --since 24h
  wf audit --since 7d --limit 0             # everything of the last week
  wf audit --json | jq -r '.records[] | select(.principal == "alice") | .reason'
`

// auditDoc is audit's --json document.
type auditDoc struct {
	Records []json.RawMessage `json:"records"`
}

func (c *cli) audit(args []string) int {
	fs := c.flagSet("audit", auditUsage)
	since := fs.String("since", "", "only records of this last span: a duration (90m, 24h), days (7d) or an RFC 3339 time")
	limit := fs.Int("limit", 100, "at most this many records, the newest (0: all)")
	pos, code := c.parse(fs, "audit", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("audit", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	if *limit < 0 {
		return c.usageError("audit", "--limit must be 0 (all) or more")
	}
	now := time.Now()
	from, err := parseSince(*since, now)
	if err != nil {
		return c.usageError("audit", err.Error())
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	records, err := cl.AuditLog(ctx, client.AuditQuery{Since: from, Limit: *limit})
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		doc := auditDoc{Records: make([]json.RawMessage, 0, len(records))}
		for _, r := range records {
			doc.Records = append(doc.Records, rawProto(r))
		}
		return c.done(printJSON(c.stdout, doc))
	}
	if len(records) == 0 {
		if *since != "" {
			fmt.Fprintf(c.stdout, "No audit records since %s.\n", from.UTC().Format(auditTimeLayout))
		} else {
			fmt.Fprintln(c.stdout, "No audit records.")
		}
		return exitOK
	}
	printAudit(c.stdout, records, time.Now())
	n := len(records)
	more := ""
	if *limit > 0 && n == *limit {
		more = fmt.Sprintf(" (the newest %d; --limit 0 for all)", n)
	}
	fmt.Fprintf(c.stdout, "%d audit %s%s\n", n, plural(n, "record", "records"), more)
	return exitOK
}

// auditTimeLayout is how the audit table writes instants: UTC, so that
// records read the same to everyone in an incident and match the logs.
const auditTimeLayout = "2006-01-02 15:04:05Z"

// printAudit writes the audit table; now is what ages are relative to.
func printAudit(w io.Writer, records []*durablev1.AuditRecord, now time.Time) {
	t := table(w)
	row(t, "ID", "TIME", "PRINCIPAL", "ROLE", "ACTION", "COUNT", "SELECTION", "REASON")
	for _, r := range records {
		when := "-"
		if r.GetTime() != nil {
			at := r.GetTime().AsTime()
			when = at.UTC().Format(auditTimeLayout) + " (" + relative(at, now) + ")"
		}
		row(t, "#"+strconv.FormatInt(r.GetId(), 10), when, dash(r.GetPrincipal()), dash(r.GetRole()), auditAction(r), auditCount(r),
			cut(auditSelection(r), 60), dash(cut(r.GetReason(), 80)))
	}
	t.Flush()
}

// auditAction names an action the way an operator asked for it, with the
// operation it started or cancelled.
func auditAction(r *durablev1.AuditRecord) string {
	op := ""
	if id := r.GetOperationId(); id != "" {
		op = " " + id
	}
	switch r.GetRpc() {
	case "RedriveDeadLetter":
		return "redrive"
	case "RedriveDeadLetters":
		return "bulk redrive" + op
	case "CancelOperation":
		return "cancel" + op
	case "SetPolicyOverride":
		return "policy set"
	case "ClearPolicyOverride":
		return "policy clear"
	}
	return dash(r.GetRpc())
}

// auditCount is "count/matched", marked while the action is not done; for
// a cancel, the letters it kept in the dead-letter queue.
func auditCount(r *durablev1.AuditRecord) string {
	if r.GetRpc() == "CancelOperation" {
		return fmt.Sprintf("kept %d/%d", r.GetCount(), r.GetMatched())
	}
	s := strconv.FormatInt(r.GetCount(), 10) + "/" + strconv.FormatInt(r.GetMatched(), 10)
	if !r.GetDone() {
		s += " unfinished"
	}
	return s
}

// auditSelection says what an action selected: the override it set or
// cleared, its filter ("all" when the filter is empty), else the one
// activity or the ones it touched.
func auditSelection(r *durablev1.AuditRecord) string {
	if o := r.GetPolicyOverride(); o != nil {
		return overrideTarget(o) + ": " + patchText(o.GetPatch())
	}
	if f := r.GetFilter(); f != nil {
		return filterText(f)
	}
	acts := r.GetActivities()
	if len(acts) == 0 {
		return "-"
	}
	first := activity.EscapeID(acts[0].GetWorkflowId()) + "/" + activity.EscapeID(acts[0].GetActivityId())
	if r.GetRpc() == "RedriveDeadLetter" || r.GetMatched() == 1 && len(acts) == 1 {
		return first
	}
	return fmt.Sprintf("list of %d: %s, …", r.GetMatched(), first)
}

// parseSince turns --since into the earliest instant wanted (see
// parseInstant). Empty means no bound (the zero time).
func parseSince(s string, now time.Time) (time.Time, error) {
	t, err := parseInstant(s, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %w", err)
	}
	return t, nil
}
