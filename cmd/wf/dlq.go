package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const dlqUsage = `Usage: wf dlq list [filters] [--group]
       wf dlq redrive WORKFLOW_ID ACTIVITY_ID [--reason R]
       wf dlq redrive --all [filters] [--rate N] [--reason R]

Dead letters are activities whose attempts (or schedule-to-close budget) ran
out. Their workflows keep waiting; once the cause is fixed, a redrive puts the
activity back in its queue as attempt 1 and the workflow carries on.

With --all the daemon takes every letter that matches the filters when the
call starts and releases them at a steady rate (--rate per second; the
daemon's default is 50), so that recovering workers are not hit by a herd.
wf waits until the last one is out, with no time limit unless --timeout is
given; Ctrl-C or --timeout stops the daemon releasing more.

Every redrive is written to the daemon's audit log in the same transaction:
who (your principal and role), when, what was selected, how many went out
and why. --reason is the why: name the incident or the fix, for whoever reads
'wf audit' later. A bulk redrive is one record, counting letters as they go
('wf watch' in another terminal shows it count up); one cut short shows how
far it got.

An outage dead-letters many activities with messages that differ only in an
order number, a host or a wait: 'wf dlq list --group' shows them as one line
per failure fingerprint (the failure type plus its message with numbers, ids,
addresses, hex and quoted values replaced by placeholders), with a count, the
first and last time one was dead-lettered and an example. --fingerprint F
then selects one group, for a list or a redrive.

Filters (both subcommands):
  --workflow ID          only this workflow
  --activity-type T      only activities of this type
  --failure-type T       only letters whose last failure has this type
  --fingerprint F        only letters whose last failure has this fingerprint
                         (the first column of --group)
  --dead-after WHEN      only letters dead-lettered at or after WHEN: a span
                         back from now (90m, 24h, 7d) or an RFC 3339 time
  --dead-before WHEN     only letters dead-lettered before WHEN

Examples:
  wf dlq list
  wf dlq list --group
  wf dlq list --fingerprint 3f2a9c1b7d4e --dead-after 1h
  wf dlq list --activity-type ChargeCard --json | jq '.deadLetters | length'
  wf dlq redrive order-42 3 --reason "INC-1234: card limit raised"
  wf dlq redrive --all --failure-type Timeout --rate 20 --reason "INC-1234: card API back"
  wf audit --since 1h
`

func (c *cli) dlq(args []string) int {
	if len(args) == 0 {
		return c.usageError("dlq", "want a subcommand: list or redrive")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.stdout, dlqUsage)
		return exitOK
	case "list":
		return c.dlqList(args[1:])
	case "redrive":
		return c.dlqRedrive(args[1:])
	}
	return c.usageError("dlq", fmt.Sprintf("unknown subcommand %q: want list or redrive", args[0]))
}

// filterFlags registers the dead-letter filters on fs.
func filterFlags(fs *flag.FlagSet) *client.DeadLetterFilter {
	f := &client.DeadLetterFilter{}
	fs.StringVar(&f.WorkflowID, "workflow", "", "only dead letters of this workflow")
	fs.StringVar(&f.ActivityType, "activity-type", "", "only dead letters of this activity type")
	fs.StringVar(&f.FailureType, "failure-type", "", "only dead letters whose last failure has this type")
	fs.StringVar(&f.FailureFingerprint, "fingerprint", "", "only dead letters whose last failure has this fingerprint (see --group)")
	fs.Var(instantFlag{&f.DeadLetteredAfter}, "dead-after", "only dead letters dead-lettered at or after this `time`: a span back from now (90m, 24h, 7d) or an RFC 3339 time")
	fs.Var(instantFlag{&f.DeadLetteredBefore}, "dead-before", "only dead letters dead-lettered before this `time` (as --dead-after)")
	return f
}

// checkFilter reports a filter the daemon would refuse, as a usage error of
// cmd; -1 when it is fine.
func (c *cli) checkFilter(cmd string, f *client.DeadLetterFilter) int {
	if !f.DeadLetteredAfter.IsZero() && !f.DeadLetteredBefore.IsZero() && !f.DeadLetteredBefore.After(f.DeadLetteredAfter) {
		return c.usageError(cmd, "--dead-before must be later than --dead-after")
	}
	return -1
}

func (c *cli) dlqList(args []string) int {
	fs := c.flagSet("dlq list", dlqUsage)
	filter := filterFlags(fs)
	group := fs.Bool("group", false, "one line per failure fingerprint: count, type, normalised message, first and last dead-lettered, an example")
	pos, code := c.parse(fs, "dlq list", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("dlq list", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	if code := c.checkFilter("dlq list", filter); code >= 0 {
		return code
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	letters, err := cl.ListDeadLetters(ctx, *filter)
	if err != nil {
		return c.fail(err)
	}
	if *group {
		return c.printGroups(client.GroupByFingerprint(letters), len(letters))
	}
	if c.g.json {
		doc := deadLettersDoc{DeadLetters: make([]json.RawMessage, 0, len(letters))}
		for _, a := range letters {
			doc.DeadLetters = append(doc.DeadLetters, rawProto(a))
		}
		return c.done(printJSON(c.stdout, doc))
	}
	if len(letters) == 0 {
		fmt.Fprintln(c.stdout, "No dead letters.")
		return exitOK
	}
	now := time.Now()
	t := table(c.stdout)
	row(t, "WORKFLOW", "ACTIVITY", "TYPE", "ATTEMPTS", "DEAD SINCE", "REDRIVES", "LAST FAILURE")
	for _, a := range letters {
		since := "-"
		if a.GetDeadLetteredTime() != nil {
			since = relative(a.GetDeadLetteredTime().AsTime(), now)
		}
		row(t, a.GetWorkflowId(), a.GetActivityId(), a.GetActivityType(), attemptOf(a), since,
			strconv.Itoa(int(a.GetRedrives())), dash(cut(failureText(a.GetLastFailure()), 100)))
	}
	t.Flush()
	fmt.Fprintf(c.stdout, "%d dead %s\n", len(letters), plural(len(letters), "letter", "letters"))
	return exitOK
}

// redriveDoc is the --json document of dlq redrive.
type redriveDoc struct {
	// Redriven holds the letters put back: their new state for a single
	// redrive, {workflowId, activityId} for --all (the first 10,000).
	Redriven []json.RawMessage `json:"redriven"`
	// Failed is empty: a single redrive that fails exits 1 with the
	// reason on stderr, and --all reports letters that were no longer
	// dead in Skipped. Kept for scripts written against the old document.
	Failed []redriveFailure `json:"failed"`
	// Matched is how many letters the selection matched.
	Matched int64 `json:"matched"`
	// Skipped is how many of them were no longer dead-lettered when their
	// turn came.
	Skipped int64 `json:"skipped"`
	// Count is how many were put back.
	Count int64 `json:"count"`
	// AuditID is the audit record of a bulk redrive.
	AuditID int64 `json:"auditId,omitempty"`
}

type redriveFailure struct {
	WorkflowID string `json:"workflowId"`
	ActivityID string `json:"activityId"`
	Error      string `json:"error"`
}

func (c *cli) dlqRedrive(args []string) int {
	fs := c.flagSet("dlq redrive", dlqUsage)
	filter := filterFlags(fs)
	all := fs.Bool("all", false, "redrive every dead letter that matches the filters, paced by the daemon")
	rate := fs.Float64("rate", 0, "with --all: letters released per second (default: the daemon's, 50)")
	reason := fs.String("reason", "", "why, for the audit log and the workflow's history (an incident, a fix)")
	pos, code := c.parse(fs, "dlq redrive", args)
	if code >= 0 {
		return code
	}
	rateSet := false
	fs.Visit(func(f *flag.Flag) { rateSet = rateSet || f.Name == "rate" })
	filtered := *filter != client.DeadLetterFilter{}
	if code := c.checkFilter("dlq redrive", filter); code >= 0 {
		return code
	}
	switch {
	case *all && len(pos) != 0:
		return c.usageError("dlq redrive", "give either WORKFLOW_ID ACTIVITY_ID or --all, not both")
	case !*all && len(pos) != 2:
		return c.usageError("dlq redrive", "want WORKFLOW_ID ACTIVITY_ID, or --all [filters]")
	case !*all && filtered:
		return c.usageError("dlq redrive", "filters only apply with --all")
	case !*all && rateSet:
		return c.usageError("dlq redrive", "--rate only applies with --all")
	case rateSet && !(*rate > 0):
		return c.usageError("dlq redrive", "--rate must be positive")
	}
	if *all {
		return c.redriveAll(*filter, *rate, *reason)
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	// The raw call, for the audit record's id that Client.Redrive drops.
	resp, err := cl.Service().RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: pos[0], ActivityId: pos[1], Reason: *reason})
	if err != nil {
		return c.fail(fmt.Errorf("redrive %s/%s: %w", pos[0], pos[1], err))
	}
	a := resp.GetActivity()
	if c.g.json {
		return c.done(printJSON(c.stdout, redriveDoc{
			Redriven: []json.RawMessage{rawProto(a)}, Failed: []redriveFailure{},
			Matched: 1, Count: 1, AuditID: resp.GetAuditId(),
		}))
	}
	fmt.Fprintf(c.stdout, "redrove %s/%s (%s): queued as attempt %d · audit #%d\n", a.GetWorkflowId(), a.GetActivityId(), a.GetActivityType(), a.GetAttempt(), resp.GetAuditId())
	return exitOK
}

// redriveAll is dlq redrive --all: one call in which the daemon selects and
// paces the letters. It runs until the daemon is done unless --timeout is
// given; Ctrl-C ends the call, which stops the daemon releasing more.
func (c *cli) redriveAll(filter client.DeadLetterFilter, rate float64, reason string) int {
	ctx, cl, done, code := c.connect(true)
	if code >= 0 {
		return code
	}
	defer done()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !c.g.json {
		// stderr, as start --wait does: a bulk redrive can take minutes
		// of silence, and stdout stays the result.
		what := "every dead letter"
		if sel := filterText(filter.Proto()); sel != "all" {
			what = "the dead letters with " + sel
		}
		pace := ", paced by the daemon"
		if rate > 0 {
			pace = " at " + strconv.FormatFloat(rate, 'f', -1, 64) + "/s"
		}
		fmt.Fprintf(c.stderr, "redriving %s%s; Ctrl-C stops the rest\n", what, pace)
	}
	resp, err := cl.RedriveAll(ctx, filter, client.WithReason(reason), client.WithRate(rate))
	if err != nil {
		if ctx.Err() != nil {
			why := "interrupted"
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				why = "--timeout " + c.g.timeout.String() + " ran out"
			}
			fmt.Fprintf(c.stderr, "wf: redrive --all stopped: %s; letters already out stay redriven, and 'wf audit' shows how many\n", why)
			return exitFailed
		}
		return c.fail(err)
	}
	if c.g.json {
		doc := redriveDoc{
			Redriven: make([]json.RawMessage, 0, len(resp.GetRedriven())), Failed: []redriveFailure{},
			Matched: resp.GetMatched(), Skipped: resp.GetSkipped(), Count: resp.GetCount(), AuditID: resp.GetAuditId(),
		}
		for _, ref := range resp.GetRedriven() {
			doc.Redriven = append(doc.Redriven, rawProto(ref))
		}
		return c.done(printJSON(c.stdout, doc))
	}
	if resp.GetMatched() == 0 {
		none := "No dead letters"
		if sel := filterText(filter.Proto()); sel != "all" {
			none = "No dead letters match " + sel
		}
		fmt.Fprintf(c.stdout, "%s; nothing redriven · audit #%d\n", none, resp.GetAuditId())
		return exitOK
	}
	for _, ref := range resp.GetRedriven() {
		if t := ref.GetActivityType(); t != "" {
			fmt.Fprintf(c.stdout, "redrove %s/%s (%s)\n", ref.GetWorkflowId(), ref.GetActivityId(), t)
		} else {
			fmt.Fprintf(c.stdout, "redrove %s/%s\n", ref.GetWorkflowId(), ref.GetActivityId())
		}
	}
	if n := resp.GetCount() - int64(len(resp.GetRedriven())); n > 0 {
		fmt.Fprintf(c.stdout, "… and %d more\n", n)
	}
	fmt.Fprintf(c.stdout, "redrove %d of %d dead %s (%d skipped) · audit #%d\n", resp.GetCount(), resp.GetMatched(),
		plural(int(resp.GetMatched()), "letter", "letters"), resp.GetSkipped(), resp.GetAuditId())
	return c.done(nil)
}
