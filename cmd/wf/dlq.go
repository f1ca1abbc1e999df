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

const dlqUsage = `Usage: wf dlq list [filters] [--group]
       wf dlq redrive WORKFLOW_ID ACTIVITY_ID [--reason R] [edit flags]
       wf dlq redrive --all [filters] [--rate N] [--reason R] [edit flags] [--dry-run | --wait]

Dead letters are activities whose attempts (or schedule-to-close budget) ran
out. Their workflows keep waiting; once the cause is fixed, a redrive puts the
activity back in its queue as attempt 1 and the workflow carries on.

With --all the daemon starts a redrive operation: it takes every letter that
matches the filters now and releases them, oldest first, at a steady rate
(--rate per second; the daemon's default is 50), so that recovering workers
are not hit by a herd. wf prints the operation's id and returns at once; the
operation goes on in the daemon, across restarts, whatever happens to wf.
'wf ops describe ID' shows its progress, 'wf ops cancel ID' stops it (what
went out stays out, the rest stays here). --wait follows it on one line
until it is done and exits 0 when it completed, 1 when it was cancelled.
Operations already running are named on stderr: letters that two select go
out at the sum of their rates.
--dry-run only says what would match and how long the rate would take.

Edit then redrive: the edit flags change the options of the letters as they
go back (the retry policy and timeouts the workflow gave them), validated
like a schedule's, e.g. --max-attempts 10 --start-to-close 2m. The change is
in each letter's history and in the audit log. Only the flags given change.

Every redrive is written to the daemon's audit log in the same transaction:
who (your principal and role), when, what was selected, how many went out
and why. --reason is the why: name the incident or the fix, for whoever reads
'wf audit' later. An operation is one record that counts letters as they go.

An outage dead-letters many activities with messages that differ only in an
order number, a host or a wait: 'wf dlq list --group' shows them as one line
per failure fingerprint (the failure type plus its message with numbers, ids,
addresses, hex and quoted values replaced by placeholders), with a count, the
first and last time one was dead-lettered and an example. --fingerprint F
then selects one group, to list or to redrive.

A selection means the same here, in 'wf activities' and in the console:
type:Timeout selects exactly the letters that failed with Timeout, never
HeartbeatTimeout. When it has words the daemon's filter has no field for
(wf:PREFIX*, queue:, attempt>=, free text), wf selects the letters itself
and a redrive sends exactly those, by name.

Filters (both subcommands):
  --select WORDS         selection words, as in the console: 'type:Timeout attempt>=3'
  --workflow ID          only this workflow (wf:ID)
  --activity-type T      only activities of this type (act:T)
  --failure-type T       only letters whose last failure has exactly this type (type:T)
  --fingerprint F        only letters whose last failure has this fingerprint
                         (the first column of --group) (fp:F)
  --dead-after WHEN      only letters dead-lettered at or after WHEN: a span
                         back from now (90m, 24h, 7d) or an RFC 3339 time
  --dead-before WHEN     only letters dead-lettered before WHEN

` + selectionHelp + `
Edit flags (both forms of redrive):
  --initial DUR  --backoff F  --max-interval DUR  --max-attempts N
  --non-retryable T,...  --start-to-close DUR  --heartbeat-timeout DUR
  --schedule-to-close DUR

Examples:
  wf dlq list
  wf dlq list --group
  wf dlq list --fingerprint 3f2a9c1b7d4e --dead-after 1h
  wf dlq redrive --all --fingerprint 3f2a9c1b7d4e --reason "INC-1234: db back" --wait
  wf dlq list --activity-type ChargeCard --json | jq '.deadLetters | length'
  wf dlq redrive order-42 3 --reason "INC-1234: card limit raised"
  wf dlq redrive order-42 3 --start-to-close 2m --reason "INC-1234: slow API"
  wf dlq redrive --all --failure-type Timeout --dry-run
  wf dlq redrive --all --select 'type:Timeout wf:order-*' --dry-run
  wf dlq list --select 'act:ChargeCard queue:payments attempt>=3'
  wf dlq redrive --all --failure-type Timeout --rate 20 --reason "INC-1234: card API back"
  wf dlq redrive --all --dead-after 2h --max-attempts 10 --reason "INC-1234" --wait
  wf ops list
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

// dlqSelectionOf reads the selection of a dlq command, or reports a usage
// error of cmd (-1 when it is fine).
func (c *cli) dlqSelectionOf(cmd string, f *selectionFlags) (client.Selection, int) {
	sel, err := f.selection()
	if err == nil {
		err = sel.ForDeadLetters()
	}
	if err != nil {
		return client.Selection{}, c.usageError(cmd, err.Error())
	}
	return sel, -1
}

func (c *cli) dlqList(args []string) int {
	fs := c.flagSet("dlq list", dlqUsage)
	flags := dlqSelection(fs)
	group := fs.Bool("group", false, "one line per failure fingerprint: count, type, normalised message, first and last dead-lettered, an example")
	pos, code := c.parse(fs, "dlq list", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("dlq list", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	sel, code := c.dlqSelectionOf("dlq list", flags)
	if code >= 0 {
		return code
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	letters, err := cl.SelectDeadLetters(ctx, sel)
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
		if sel.IsZero() {
			fmt.Fprintln(c.stdout, "No dead letters.")
		} else {
			fmt.Fprintf(c.stdout, "No dead letters match %s.\n", sel)
		}
		return exitOK
	}
	printLetters(c.stdout, letters, time.Now())
	fmt.Fprintf(c.stdout, "%d dead %s\n", len(letters), plural(len(letters), "letter", "letters"))
	return exitOK
}

// printLetters writes the dead-letter table; now is what ages are relative
// to.
func printLetters(w io.Writer, letters []*durablev1.PendingActivity, now time.Time) {
	t := table(w)
	row(t, "WORKFLOW", "ACTIVITY", "TYPE", "ATTEMPTS", "DEAD SINCE", "REDRIVES", "LAST FAILURE")
	for _, a := range letters {
		since := "-"
		if a.GetDeadLetteredTime() != nil {
			since = relative(a.GetDeadLetteredTime().AsTime(), now)
		}
		row(t, activity.EscapeID(a.GetWorkflowId()), activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType()), attemptOf(a), since,
			strconv.Itoa(int(a.GetRedrives())), dash(cut(failureText(a.GetLastFailure()), 100)))
	}
	t.Flush()
}
