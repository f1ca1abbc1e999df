package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const activitiesUsage = `
Usage: wf activities [--select WORDS] [--state S] [--min-attempt N]
                     [--failure-type T] [--fingerprint F] [--activity-type A]
                     [--task-queue Q]

Lists pending activities across every workflow: the ones retrying, running,
waiting for a worker or dead-lettered, with their attempt n/max, when the
next attempt is due or the lease ends, and the last failure. It is the
question "which activities are hurting right now, and where" in one call:
the daemon reads an index of activities by state and type, so a narrow
--state and --activity-type stay cheap with millions of workflows.

States: scheduled (waiting for a worker), running (leased to one), retrying
(the last attempt failed, the next is due later), dead-lettered.

NEXT counts down to the next attempt or the end of the lease, as the
console does. An activity due for more than 2s that no worker has taken
says for how long ("due 42s ago, no worker yet"); 'wf describe' and the
queues view say whether anybody polls its queue.

Activities come grouped by state, then type, then workflow. --fingerprint
takes the first column of 'wf dlq list --group'. --select takes the words
of the console's filter; each flag is the same as its word.

` + selectionHelp + `
Examples:
  wf activities --state retrying --min-attempt 3
  wf activities --state running --activity-type ChargeCard
  wf activities --failure-type StartToCloseTimeout --task-queue payments
  wf activities --select 'state:retrying attempt>=3 wf:order-*'
  wf activities --select 'queue:payments nopoller'
  wf activities --state retrying --json | jq -r '.activities[].workflowId' | sort -u
`

// stateByName maps --state values to the proto enum.
var stateByName = map[string]durablev1.ActivityState{
	"":              durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED,
	"all":           durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED,
	"scheduled":     durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED,
	"running":       durablev1.ActivityState_ACTIVITY_STATE_STARTED,
	"started":       durablev1.ActivityState_ACTIVITY_STATE_STARTED,
	"retrying":      durablev1.ActivityState_ACTIVITY_STATE_RETRYING,
	"dead-lettered": durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED,
	"dead":          durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED,
}

// activitiesDoc is the --json document of activities.
type activitiesDoc struct {
	Activities []json.RawMessage `json:"activities"`
}

func (c *cli) activities(args []string) int {
	fs := c.flagSet("activities", activitiesUsage)
	stateName := fs.String("state", "", "only activities in this state: scheduled, running, retrying or dead-lettered (the word state:S)")
	flags := registerSelection(fs,
		map[string]string{"failure-type": "type", "fingerprint": "fp", "activity-type": "act", "task-queue": "queue"},
		map[string]string{
			"failure-type":  "only activities whose last failure has exactly this type (type:T)",
			"fingerprint":   "only activities whose last failure has this fingerprint, from wf dlq list --group (fp:F)",
			"activity-type": "only activities of this type (act:A)",
			"task-queue":    "only activities of this task queue (queue:Q)",
		}, false, true)
	pos, code := c.parse(fs, "activities", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("activities", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	st, ok := stateByName[*stateName]
	if !ok {
		return c.usageError("activities", fmt.Sprintf("--state %q: want scheduled, running, retrying or dead-lettered", *stateName))
	}
	if flags.minAttempt < 0 || flags.minAttempt > 10000 {
		return c.usageError("activities", "--min-attempt must be in [0, 10000]")
	}
	sel, err := flags.selection()
	if err == nil && st != durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED {
		if err = sel.AddWord("state:" + client.StateWord(st)); err != nil {
			err = fmt.Errorf("--state %s and --select disagree", *stateName)
		}
	}
	if err != nil {
		return c.usageError("activities", err.Error())
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	acts, err := cl.SelectActivities(ctx, sel)
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		doc := activitiesDoc{Activities: make([]json.RawMessage, 0, len(acts))}
		for _, a := range acts {
			doc.Activities = append(doc.Activities, rawProto(a))
		}
		return c.done(printJSON(c.stdout, doc))
	}
	if len(acts) == 0 {
		fmt.Fprintln(c.stdout, "No pending activities match.")
		return exitOK
	}
	now := time.Now()
	t := table(c.stdout)
	row(t, "WORKFLOW", "ACTIVITY", "TYPE", "STATE", "ATTEMPT", "NEXT", "LAST FAILURE")
	for _, a := range acts {
		row(t, activity.EscapeID(a.GetWorkflowId()), activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType()), activityState(a.GetState()),
			attemptOf(a), next(a, now), dash(cut(failureText(a.GetLastFailure()), 80)))
	}
	t.Flush()
	fmt.Fprintf(c.stdout, "%d %s\n", len(acts), plural(len(acts), "activity", "activities"))
	return exitOK
}
