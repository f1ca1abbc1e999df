package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const historyUsage = `
Usage: wf history WORKFLOW_ID

Prints the events of a workflow, oldest first, one per line: event id, time,
type and the fields that matter for that type (activity id and type, attempt,
worker, failure, result and input previews, timers).

Examples:
  wf history order-42
  wf history order-42 --json | jq -r '.events[] | select(.type == "EVENT_TYPE_ACTIVITY_DEAD_LETTERED") | .activityId'
`

func (c *cli) history(args []string) int {
	fs := c.flagSet("history", historyUsage)
	pos, code := c.parse(fs, "history", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError("history", "want exactly one WORKFLOW_ID")
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	events, err := cl.History(ctx, pos[0])
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		return c.done(printProto(c.stdout, &durablev1.GetWorkflowHistoryResponse{Events: events}))
	}
	now := time.Now()
	t := table(c.stdout)
	row(t, "ID", "TIME", "EVENT", "DETAILS")
	for _, e := range events {
		row(t, strconv.FormatInt(e.GetEventId(), 10), stamp(e.GetTime(), now), eventName(e.GetType()), eventDetails(e))
	}
	return c.done(t.Flush())
}

// eventDetails picks the fields of an event that say what happened.
func eventDetails(e *durablev1.HistoryEvent) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("type", activity.EscapeID(e.GetWorkflowType()))
	add("queue", activity.EscapeID(e.GetTaskQueue()))
	if e.GetActivityId() != "" {
		add("activity", activity.EscapeID(e.GetActivityId())+" "+activity.EscapeID(e.GetActivityType()))
	}
	if e.GetAttempt() > 0 {
		add("attempt", strconv.Itoa(int(e.GetAttempt())))
	}
	if e.GetScheduledEventId() > 0 {
		add("scheduled", strconv.FormatInt(e.GetScheduledEventId(), 10))
	}
	if o := e.GetActivityOptions(); o != nil {
		if d := o.GetStartToCloseTimeout(); d != nil {
			add("start_to_close", human(d.AsDuration()))
		}
		if d := o.GetHeartbeatTimeout(); d != nil {
			add("heartbeat", human(d.AsDuration()))
		}
		if n := o.GetRetryPolicy().GetMaxAttempts(); n > 0 {
			add("max_attempts", strconv.Itoa(int(n)))
		}
	}
	if e.GetTimerId() != "" {
		add("timer", activity.EscapeID(e.GetTimerId()))
		if d := e.GetTimerDuration(); d != nil {
			add("duration", human(d.AsDuration()))
		}
	}
	add("worker", activity.EscapeID(e.GetIdentity()))
	add("input", preview(e.GetInput(), 60))
	add("result", preview(e.GetResult(), 60))
	if f := e.GetFailure(); f != nil {
		parts = append(parts, "failure="+cut(failureText(f), 80))
	}
	return strings.Join(parts, " ")
}
