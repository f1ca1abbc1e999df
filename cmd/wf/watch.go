package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const watchUsage = `
Usage: wf watch [--snapshot]

Follows the daemon's change stream until interrupted: first a snapshot of
pending activities, dead letters, workflows and policy overrides, then every
change. Each activity, workflow, policy override (set or cleared) or audit
record (a redrive, updated as a bulk one goes) in an event is printed as one
line, prefixed with the event's time and kind (snapshot, upsert, remove).
While the daemon refuses changes of state (its disk is below the reserve, or
it started read-only), a line says since when and why; another says when
writes are accepted again.
With --json, each event is one JSON object on one line (JSON Lines).

If wf watch falls so far behind that the daemon ends its stream (Aborted:
it buffers 4,096 changes per watcher), it subscribes again at once and a
fresh snapshot follows; read it as the first one, the state as it is now.

Examples:
  wf watch
  wf watch --snapshot                  # print the current state and exit
  wf watch --json | jq -c 'select(.kind == "WATCH_EVENT_KIND_UPSERT")'
`

func (c *cli) watch(args []string) int {
	fs := c.flagSet("watch", watchUsage)
	snapshot := fs.Bool("snapshot", false, "exit after the initial snapshot")
	pos, code := c.parse(fs, "watch", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("watch", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	// --timeout means "watch for this long": a timer cancels the stream, so
	// the daemon never sees a deadline and the end is not an error.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if c.g.timeout > 0 {
		defer time.AfterFunc(c.g.timeout, cancel).Stop()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cl, code := c.dial(ctx)
	if code >= 0 {
		return code
	}
	defer cl.Close()

	wctx, unsubscribe := context.WithCancel(ctx)
	defer unsubscribe()
	events, errc := cl.Watch(wctx)
	for ev := range events {
		var err error
		if c.g.json {
			_, err = fmt.Fprintf(c.stdout, "%s\n", rawProto(ev))
		} else {
			err = printEvent(c.stdout, ev)
		}
		if err != nil {
			unsubscribe()
			return c.done(err)
		}
		if *snapshot && ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
			unsubscribe()
			return exitOK
		}
	}
	if err := <-errc; err != nil && ctx.Err() == nil {
		return c.fail(err)
	}
	return exitOK // interrupted, or --timeout: watch for that long
}

// printEvent writes one line per activity, workflow or removed ref in ev, or
// one line for an event that carries none.
func printEvent(w io.Writer, ev *durablev1.WatchEvent) error {
	now := time.Now()
	if st := ev.GetServerTime(); st != nil {
		now = st.AsTime()
	}
	head := fmt.Sprintf("%s %-13s", now.Local().Format("15:04:05.000"),
		enumWord(ev.GetKind().String(), "WATCH_EVENT_KIND_"))
	var lines []string
	for _, a := range ev.GetActivities() {
		line := fmt.Sprintf("activity %s/%s %s %s %s %s", activity.EscapeID(a.GetWorkflowId()), activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType()),
			activityState(a.GetState()), attemptOf(a), next(a, now))
		if f := failureText(a.GetLastFailure()); f != "" {
			line += " last failure: " + cut(f, 60)
		}
		if a.GetLastHeartbeatTime() != nil {
			line += " heartbeat " + heartbeatAge(a, now)
			if d := preview(a.GetHeartbeatDetails(), 40); d != "" {
				line += " " + d
			}
		}
		lines = append(lines, line)
	}
	for _, wf := range ev.GetWorkflows() {
		line := fmt.Sprintf("workflow %s %s %s pending=%d dead=%d", activity.EscapeID(wf.GetWorkflowId()), activity.EscapeID(wf.GetWorkflowType()),
			workflowStatus(wf.GetStatus()), wf.GetPendingActivities(), wf.GetDeadLetters())
		if f := failureText(wf.GetFailure()); f != "" {
			line += " failure: " + cut(f, 60)
		}
		lines = append(lines, line)
	}
	for _, r := range ev.GetRemoved() {
		lines = append(lines, fmt.Sprintf("activity %s/%s", activity.EscapeID(r.GetWorkflowId()), activity.EscapeID(r.GetActivityId())))
	}
	for _, op := range ev.GetOperations() {
		lines = append(lines, fmt.Sprintf("operation %s %s %s %s", op.GetId(), opState(op.GetState()), opProgress(op), cut(opSelection(op), 60)))
	}
	for _, r := range ev.GetAuditRecords() {
		line := fmt.Sprintf("audit #%d %s (%s) %s %s %s", r.GetId(), r.GetPrincipal(), r.GetRole(),
			auditAction(r), auditCount(r), cut(auditSelection(r), 60))
		if r.GetReason() != "" {
			line += " reason: " + cut(r.GetReason(), 60)
		}
		lines = append(lines, line)
	}
	for _, o := range ev.GetPolicyOverrides() {
		if o.GetCleared() {
			lines = append(lines, "policy override of "+overrideTarget(o)+" cleared")
			continue
		}
		lines = append(lines, fmt.Sprintf("policy override of %s: %s by %s", overrideTarget(o), patchText(o.GetPatch()), dash(o.GetPrincipal())))
	}
	for _, q := range ev.GetTaskQueues().GetTaskQueues() {
		line := fmt.Sprintf("queue %s pollers=%d backlog=%d later=%d oldest=%s wf-tasks=%d leases=%d %s", activity.EscapeID(q.GetName()),
			len(q.GetPollers()), q.GetActivityTasks().GetReady(), q.GetActivityTasks().GetLater(), oldestCell(q, now),
			q.GetWorkflowTasks().GetReady(), client.LeaseCount(q), client.QueueStatus(q))
		lines = append(lines, line)
	}
	if w := ev.GetWrites(); w.GetRefused() {
		lines = append(lines, "writes refused since "+w.GetSince().AsTime().Local().Format("15:04:05")+": "+w.GetReason())
	} else if w != nil && ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT {
		lines = append(lines, "writes accepted again")
	}
	if len(lines) == 0 {
		lines = []string{""}
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimRight(head+" "+l, " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
