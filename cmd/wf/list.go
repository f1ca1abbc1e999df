package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const listUsage = `
Usage: wf list [--status running|completed|failed]

Lists workflows with their status, start time, duration, pending activities
and dead letters.

Examples:
  wf list
  wf list --status running
  wf list --status failed --json | jq -r '.workflows[].workflowId'
`

// statusByName maps --status values to the proto enum.
var statusByName = map[string]durablev1.WorkflowStatus{
	"":          durablev1.WorkflowStatus_WORKFLOW_STATUS_UNSPECIFIED,
	"all":       durablev1.WorkflowStatus_WORKFLOW_STATUS_UNSPECIFIED,
	"running":   durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING,
	"completed": durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED,
	"failed":    durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED,
}

func (c *cli) list(args []string) int {
	fs := c.flagSet("list", listUsage)
	statusName := fs.String("status", "", "only workflows in this status: running, completed or failed")
	pos, code := c.parse(fs, "list", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("list", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	st, ok := statusByName[*statusName]
	if !ok {
		return c.usageError("list", fmt.Sprintf("--status %q: want running, completed or failed", *statusName))
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	wfs, err := cl.ListWorkflows(ctx, st)
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		return c.done(printProto(c.stdout, &durablev1.ListWorkflowsResponse{Workflows: wfs}))
	}
	if len(wfs) == 0 {
		fmt.Fprintln(c.stdout, "No workflows.")
		return exitOK
	}
	now := time.Now()
	t := table(c.stdout)
	row(t, "WORKFLOW", "TYPE", "STATUS", "STARTED", "DURATION", "PENDING", "DEAD", "EVENTS", "FAILURE")
	for _, wf := range wfs {
		dur := "-"
		if start := wf.GetStartTime(); start != nil {
			end := now
			if wf.GetCloseTime() != nil {
				end = wf.GetCloseTime().AsTime()
			}
			dur = human(end.Sub(start.AsTime()))
		}
		row(t, activity.EscapeID(wf.GetWorkflowId()), activity.EscapeID(wf.GetWorkflowType()), workflowStatus(wf.GetStatus()),
			stamp(wf.GetStartTime(), now), dur,
			strconv.Itoa(int(wf.GetPendingActivities())), strconv.Itoa(int(wf.GetDeadLetters())),
			strconv.FormatInt(wf.GetHistoryLength(), 10), dash(cut(failureText(wf.GetFailure()), 50)))
	}
	return c.done(t.Flush())
}
