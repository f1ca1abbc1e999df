package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const queuesUsage = `
Usage: wf queues [QUEUE] [--check]

Lists the task queues the daemon knows of: the workers polling each, the
activity tasks ready and not taken (BACKLOG; "+N later" are retries still in
their backoff), how long the oldest ready task has waited (OLDEST, workflow
and activity tasks alike), the workflow tasks ready (WF TASKS) and the
activity attempts leased out (LEASES, and to how many workers).

STATUS says "no poller" when work is ready and no worker polls the queue for
it: no worker of that kind has a poll parked on the queue, has polled it in
the last minute or (for activities) holds a lease on it (a worker whose every
slot is busy does not poll). Nothing will take that work until a worker
polls the queue; check the workers' task queue and that they run.
"(workflow tasks)" or "(activities)" names the kind nobody polls for when
only one is missing. Otherwise STATUS is "busy" (work ready or leased out)
or "idle".

A queue is listed while it has work, leases, or a poller seen in the last
five minutes; the daemon forgets a worker five minutes after its last poll
unless it still holds leases there. It answers from memory, without reading
the store; pollers are not stored, so a daemon that restarted knows a worker
again at its next poll. Where several nodes share a database, each shares
the workers it sees polling every 2 seconds, and any node lists them all.

With QUEUE, the queue's pollers (identity, kind, last poll, parked now) and
leases per worker follow the table.

--check exits 1 when a queue is stalled ("no poller"), for a health probe
or a cron.

Examples:
  wf queues
  wf queues orders                 # pollers and leases of one queue
  wf queues --check || page-oncall "a task queue has no poller"
  wf queues --json | jq -r '.taskQueues[] | select(.stalled) | .name'
`

// queuesDoc is queues's --json document.
type queuesDoc struct {
	// ServerTime is the daemon's clock when it made the list (RFC 3339):
	// ages are as of then.
	ServerTime string            `json:"serverTime"`
	TaskQueues []json.RawMessage `json:"taskQueues"`
}

func (c *cli) queues(args []string) int {
	fs := c.flagSet("queues", queuesUsage)
	check := fs.Bool("check", false, "exit 1 when a queue has ready work and no poller")
	pos, code := c.parse(fs, "queues", args)
	if code >= 0 {
		return code
	}
	if len(pos) > 1 {
		return c.usageError("queues", fmt.Sprintf("unexpected argument %q", pos[1]))
	}
	name := ""
	if len(pos) == 1 {
		name = pos[0]
		if err := activity.CheckID(name); err != nil {
			return c.usageError("queues", "QUEUE: "+err.Error())
		}
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	qs, now, err := cl.TaskQueues(ctx, name)
	if err != nil {
		return c.fail(err)
	}
	result := exitOK
	if *check {
		for _, q := range qs {
			if q.GetStalled() {
				result = exitFailed
			}
		}
	}
	if c.g.json {
		doc := queuesDoc{ServerTime: now.UTC().Format(time.RFC3339Nano), TaskQueues: make([]json.RawMessage, 0, len(qs))}
		for _, q := range qs {
			doc.TaskQueues = append(doc.TaskQueues, rawProto(q))
		}
		if code := c.done(printJSON(c.stdout, doc)); code != exitOK {
			return code
		}
		return result
	}
	if len(qs) == 0 {
		if name != "" {
			fmt.Fprintf(c.stdout, "Queue %s has no work, no leases and no poller seen in the last five minutes.\n", activity.EscapeID(name))
		} else {
			fmt.Fprintln(c.stdout, "No task queues: no work, no leases and no poller seen in the last five minutes.")
		}
		return result
	}
	printQueues(c.stdout, qs, now)
	if name != "" {
		for _, q := range qs {
			fmt.Fprintln(c.stdout)
			printPollers(c.stdout, q, now)
		}
	}
	return result
}

// printQueues writes the queues table; now is what ages are relative to.
func printQueues(w io.Writer, qs []*durablev1.TaskQueue, now time.Time) {
	t := table(w)
	row(t, "QUEUE", "POLLERS", "BACKLOG", "OLDEST", "WF TASKS", "LEASES", "STATUS")
	for _, q := range qs {
		row(t, activity.EscapeID(q.GetName()), client.PollersText(q), client.BacklogText(q.GetActivityTasks()), oldestCell(q, now),
			client.BacklogText(q.GetWorkflowTasks()), client.LeasesText(q), client.QueueStatus(q))
	}
	t.Flush()
}

// oldestCell is the age of the oldest ready task, of either kind.
func oldestCell(q *durablev1.TaskQueue, now time.Time) string {
	oldest, ok := client.OldestReady(q)
	if !ok {
		return "-"
	}
	return human(max(now.Sub(oldest), 0))
}

// printPollers writes one queue's pollers and its leases per worker.
func printPollers(w io.Writer, q *durablev1.TaskQueue, now time.Time) {
	fmt.Fprintf(w, "Pollers of %s:\n", activity.EscapeID(q.GetName()))
	if len(q.GetPollers()) == 0 {
		fmt.Fprintln(w, "  none in the last five minutes")
	} else {
		t := table(w)
		row(t, "  IDENTITY", "KIND", "LAST POLL", "PARKED")
		for _, p := range q.GetPollers() {
			parked := "no"
			if p.GetParked() {
				parked = "yes"
			}
			row(t, "  "+dash(activity.EscapeID(p.GetIdentity())), taskKind(p.GetKind()), stampAgo(p.GetLastPollTime(), now), parked)
		}
		t.Flush()
	}
	fmt.Fprintf(w, "Leases of %s:\n", activity.EscapeID(q.GetName()))
	if len(q.GetLeases()) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	t := table(w)
	row(t, "  WORKER", "ACTIVITIES")
	for _, l := range q.GetLeases() {
		row(t, "  "+dash(activity.EscapeID(l.GetIdentity())), fmt.Sprint(l.GetActivities()))
	}
	t.Flush()
}

func taskKind(k durablev1.TaskKind) string {
	return enumWord(k.String(), "TASK_KIND_")
}
