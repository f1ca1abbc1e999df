package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const auditUsage = `
Usage: wf audit [--since DUR] [--limit N]

Lists the daemon's audit log, newest first: every redrive, single or bulk,
and every policy override set or cleared ('wf policy'), with its id (the one
'wf dlq redrive --all' prints), who made it (the principal of the token or
certificate, and its role; "local" when durabled runs without --auth), when,
what it selected (or the override), how many letters went out of how many
matched, and the reason given with --reason.

The record is written in the same transaction as the action, so the log
neither misses a redrive nor shows one that did not happen. A bulk redrive
is one record that counts letters as the daemon releases them; COUNT says
"unfinished" while it runs, and keeps saying it when the redrive was cut
short (Ctrl-C, --timeout, a daemon restart) at the count it reached.

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
		row(t, "#"+strconv.FormatInt(r.GetId(), 10), when, dash(r.GetPrincipal()), dash(r.GetRole()), auditAction(r.GetRpc()), auditCount(r),
			cut(auditSelection(r), 60), dash(cut(r.GetReason(), 80)))
	}
	t.Flush()
}

// auditAction names an RPC the way an operator asked for it.
func auditAction(rpc string) string {
	switch rpc {
	case "RedriveDeadLetter":
		return "redrive"
	case "RedriveDeadLetters":
		return "bulk redrive"
	case "SetPolicyOverride":
		return "policy set"
	case "ClearPolicyOverride":
		return "policy clear"
	}
	return dash(rpc)
}

// auditCount is "count/matched", marked while the action is not done.
func auditCount(r *durablev1.AuditRecord) string {
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
		return filterText(f.GetWorkflowId(), f.GetActivityType(), f.GetFailureType())
	}
	acts := r.GetActivities()
	if len(acts) == 0 {
		return "-"
	}
	first := acts[0].GetWorkflowId() + "/" + acts[0].GetActivityId()
	if r.GetRpc() == "RedriveDeadLetter" || r.GetMatched() == 1 && len(acts) == 1 {
		return first
	}
	return fmt.Sprintf("list of %d: %s, …", r.GetMatched(), first)
}

// parseSince turns --since into the earliest instant wanted: a Go duration
// (90m, 24h), days with an optional rest (7d, 1d12h), or an RFC 3339 time.
// Empty means no bound (the zero time).
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	var span time.Duration
	rest := s
	if days, after, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100000 {
			return time.Time{}, fmt.Errorf("--since %q: want a duration like 90m, 24h or 7d, or an RFC 3339 time", s)
		}
		span, rest = time.Duration(n)*24*time.Hour, after
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return time.Time{}, fmt.Errorf("--since %q: want a duration like 90m, 24h or 7d, or an RFC 3339 time", s)
		}
		span += d
	}
	if span <= 0 {
		return time.Time{}, errors.New("--since must be a positive span")
	}
	return now.Add(-span), nil
}
