package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/tinyllm/durable/activity"
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
again at its next poll.

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
		row(t, activity.EscapeID(q.GetName()), pollersCell(q), backlogCell(q.GetActivityTasks()), oldestCell(q, now),
			backlogCell(q.GetWorkflowTasks()), leasesCell(q), queueStatus(q))
	}
	t.Flush()
}

// pollersCell is "2 (1 parked)": the pollers listed and how many have a
// poll parked now.
func pollersCell(q *durablev1.TaskQueue) string {
	n, parked := len(q.GetPollers()), 0
	for _, p := range q.GetPollers() {
		if p.GetParked() {
			parked++
		}
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%d parked)", n, parked)
}

func backlogCell(b *durablev1.TaskBacklog) string {
	s := fmt.Sprint(b.GetReady())
	if b.GetLater() > 0 {
		s += fmt.Sprintf(" +%d later", b.GetLater())
	}
	return s
}

// oldestCell is the age of the oldest ready task, of either kind.
func oldestCell(q *durablev1.TaskQueue, now time.Time) string {
	var oldest time.Time
	for _, b := range []*durablev1.TaskBacklog{q.GetWorkflowTasks(), q.GetActivityTasks()} {
		if t := b.GetOldestReadyTime(); t != nil && (oldest.IsZero() || t.AsTime().Before(oldest)) {
			oldest = t.AsTime()
		}
	}
	if oldest.IsZero() {
		return "-"
	}
	return human(max(now.Sub(oldest), 0))
}

// leasesCell is "7 (3 workers)".
func leasesCell(q *durablev1.TaskQueue) string {
	var n int64
	for _, l := range q.GetLeases() {
		n += l.GetActivities()
	}
	if n == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%d %s)", n, len(q.GetLeases()), plural(len(q.GetLeases()), "worker", "workers"))
}

// queueStatus is "no poller" when ready work has no live poller of its
// kind (naming the kind when only one lacks one), "busy" when work or
// leases are out, "idle" otherwise.
func queueStatus(q *durablev1.TaskQueue) string {
	wf, act := q.GetWorkflowTasks().GetStalled(), q.GetActivityTasks().GetStalled()
	switch {
	case wf && act:
		return "no poller"
	case wf:
		return "no poller (workflow tasks)"
	case act:
		return "no poller (activities)"
	case q.GetStalled():
		return "no poller"
	}
	if q.GetWorkflowTasks().GetReady() > 0 || q.GetActivityTasks().GetReady() > 0 || len(q.GetLeases()) > 0 {
		return "busy"
	}
	return "idle"
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
