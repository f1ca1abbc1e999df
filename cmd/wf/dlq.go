package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const dlqUsage = `Usage: wf dlq list [filters]
       wf dlq redrive WORKFLOW_ID ACTIVITY_ID
       wf dlq redrive --all [filters] [--rate N]

Dead letters are activities whose attempts (or schedule-to-close budget) ran
out. Their workflows keep waiting; once the cause is fixed, a redrive puts the
activity back in its queue as attempt 1 and the workflow carries on.

Filters (both subcommands):
  --workflow ID          only this workflow
  --activity-type T      only activities of this type
  --failure-type T       only letters whose last failure has this type

Examples:
  wf dlq list
  wf dlq list --activity-type ChargeCard --json | jq length
  wf dlq redrive order-42 3
  wf dlq redrive --all --failure-type Timeout --rate 20
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
	return f
}

func (c *cli) dlqList(args []string) int {
	fs := c.flagSet("dlq list", dlqUsage)
	filter := filterFlags(fs)
	pos, code := c.parse(fs, "dlq list", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("dlq list", fmt.Sprintf("unexpected argument %q", pos[0]))
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
	if c.g.json {
		return c.done(printProto(c.stdout, &durablev1.ListDeadLettersResponse{DeadLetters: letters}))
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
	Redriven []json.RawMessage `json:"redriven"`
	Failed   []redriveFailure  `json:"failed"`
}

type redriveFailure struct {
	WorkflowID string `json:"workflowId"`
	ActivityID string `json:"activityId"`
	Error      string `json:"error"`
}

func (c *cli) dlqRedrive(args []string) int {
	fs := c.flagSet("dlq redrive", dlqUsage)
	filter := filterFlags(fs)
	all := fs.Bool("all", false, "redrive every dead letter that matches the filters")
	rate := fs.Float64("rate", 100, "with --all: at most this many redrives per second, so workers are not hit by a herd")
	pos, code := c.parse(fs, "dlq redrive", args)
	if code >= 0 {
		return code
	}
	filtered := *filter != client.DeadLetterFilter{}
	switch {
	case *all && len(pos) != 0:
		return c.usageError("dlq redrive", "give either WORKFLOW_ID ACTIVITY_ID or --all, not both")
	case !*all && len(pos) != 2:
		return c.usageError("dlq redrive", "want WORKFLOW_ID ACTIVITY_ID, or --all [filters]")
	case !*all && filtered:
		return c.usageError("dlq redrive", "filters only apply with --all")
	case *rate <= 0:
		return c.usageError("dlq redrive", "--rate must be positive")
	}
	ctx, cl, done, code := c.connect(*all)
	if code >= 0 {
		return code
	}
	defer done()

	if !*all {
		a, err := cl.Redrive(ctx, pos[0], pos[1])
		if err != nil {
			return c.fail(err)
		}
		if c.g.json {
			return c.done(printJSON(c.stdout, redriveDoc{Redriven: []json.RawMessage{rawProto(a)}, Failed: []redriveFailure{}}))
		}
		fmt.Fprintf(c.stdout, "redrove %s/%s (%s): queued as attempt %d\n", a.GetWorkflowId(), a.GetActivityId(), a.GetActivityType(), a.GetAttempt())
		return exitOK
	}

	letters, err := cl.ListDeadLetters(ctx, *filter)
	if err != nil {
		return c.fail(err)
	}
	if len(letters) == 0 && !c.g.json {
		fmt.Fprintln(c.stdout, "No dead letters match; nothing redriven.")
		return exitOK
	}
	doc, lastErr := c.redriveAll(ctx, cl, letters, *rate)
	if c.g.json {
		if err := printJSON(c.stdout, doc); err != nil {
			return c.done(err)
		}
	} else {
		fmt.Fprintf(c.stdout, "redrove %d of %d dead letters\n", len(doc.Redriven), len(letters))
	}
	if len(doc.Failed) > 0 {
		fmt.Fprintf(c.stderr, "wf: %d redrives failed, last: %s\n", len(doc.Failed), rpcPrefix.ReplaceAllString(lastErr.Error(), ""))
		return exitCode(lastErr)
	}
	return exitOK
}

// redriveAll redrives letters one at a time, at most rate per second, and
// prints a line per redrive unless --json. It stops early when ctx ends.
func (c *cli) redriveAll(ctx context.Context, cl *client.Client, letters []*durablev1.PendingActivity, rate float64) (redriveDoc, error) {
	doc := redriveDoc{Redriven: []json.RawMessage{}, Failed: []redriveFailure{}}
	var lastErr error
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for i, l := range letters {
		if i > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				lastErr = ctx.Err()
				doc.Failed = append(doc.Failed, redriveFailure{l.GetWorkflowId(), l.GetActivityId(), lastErr.Error()})
				return doc, lastErr
			}
		}
		a, err := cl.Redrive(ctx, l.GetWorkflowId(), l.GetActivityId())
		if err != nil {
			lastErr = err
			msg := rpcPrefix.ReplaceAllString(err.Error(), "")
			doc.Failed = append(doc.Failed, redriveFailure{l.GetWorkflowId(), l.GetActivityId(), msg})
			if !c.g.json {
				fmt.Fprintf(c.stdout, "failed   %s/%s (%s): %s\n", l.GetWorkflowId(), l.GetActivityId(), l.GetActivityType(), msg)
			}
			if exitCode(err) == exitUnreachable {
				return doc, err
			}
			continue
		}
		doc.Redriven = append(doc.Redriven, rawProto(a))
		if !c.g.json {
			fmt.Fprintf(c.stdout, "redrove  %s/%s (%s)\n", a.GetWorkflowId(), a.GetActivityId(), a.GetActivityType())
		}
	}
	return doc, lastErr
}
