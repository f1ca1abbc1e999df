package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const describeUsage = `
Usage: wf describe WORKFLOW_ID [--attempts N]

Shows a workflow (type, status, result or failure) and every pending
activity: state, attempt n/max, when the next retry is due or when the
current lease ends, the last failure, the age and details of the last
heartbeat, the policy in force (retry policy and timeouts, each field that a
policy override sets marked with who set it and why; see 'wf policy'), its
retry schedule and the last attempts of each. Dead letters are pending
activities too.

The schedule reads "attempt 3 at +1.2s · attempt 4 at ~+3.6s · … · gives
up after attempt 8": the attempt due next exactly, the later ones as upper
bounds (the daemon draws a random wait below each backoff, and each
attempt's own run time comes on top); while an attempt runs, the times are
counted from its failure. The console's detail pane shows the same line.

With --json the document is the daemon's reply: each pending activity has
its code's options (options), the options in force (optionsInForce) and the
fields an override sets (overriddenFields).

Activities that finished (completed, failed, or still pending when the
workflow closed) follow with their attempt trail: each attempt's worker,
start, duration and failure, kept by the daemon for its --attempt-retention
(7 days unless set), so the failures before a success can still be read.

Examples:
  wf describe order-42
  wf describe order-42 --attempts 0     # every attempt recorded
  wf describe order-42 --json | jq '.pendingActivities[] | select(.state == "ACTIVITY_STATE_DEAD_LETTERED")'
  wf describe order-42 --json | jq '.pendingActivities[] | {activityId, overriddenFields}'
  wf describe order-42 --json | jq '.finishedActivities[].activity.attempts[].failure.message'
`

func (c *cli) describe(args []string) int {
	fs := c.flagSet("describe", describeUsage)
	attempts := fs.Int("attempts", 5, "show the last N attempts of each activity, pending or finished (0: all)")
	pos, code := c.parse(fs, "describe", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError("describe", "want exactly one WORKFLOW_ID")
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	resp, err := cl.Describe(ctx, pos[0])
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		return c.done(printProto(c.stdout, resp))
	}
	now := time.Now()
	acts := resp.GetPendingActivities()
	queues, known := c.queuesWaitedOn(ctx, cl, resp, now)
	printWorkflow(c.stdout, resp.GetWorkflow(), waitText(resp.GetWorkflow(), queues, known, now), now)
	if len(acts) == 0 {
		fmt.Fprintln(c.stdout, "\nNo pending activities.")
	} else {
		fmt.Fprintln(c.stdout)
		printActivities(c.stdout, acts, queues, known, now)
		overrides := c.overridesFor(ctx, cl, acts)
		for _, a := range acts {
			fmt.Fprintln(c.stdout)
			printPolicy(c.stdout, a, client.OverrideFor(overrides, a.GetActivityType(), a.GetTaskQueue()))
			printSchedule(c.stdout, a, now)
			printAttempts(c.stdout, a, *attempts, now)
		}
	}
	if fins := resp.GetFinishedActivities(); len(fins) > 0 {
		fmt.Fprintln(c.stdout)
		printFinished(c.stdout, fins, *attempts, now)
	}
	return exitOK
}

// queuesWaitedOn fetches the task queues when the workflow's task or one of
// its activities waits in one, to tell whether a worker polls it. known is
// false when nothing waits or the daemon did not answer (an older one).
func (c *cli) queuesWaitedOn(ctx context.Context, cl *client.Client, resp *durablev1.DescribeWorkflowResponse, now time.Time) (queues []*durablev1.TaskQueue, known bool) {
	_, waits := client.WorkflowWait(resp.GetWorkflow(), nil)
	for _, a := range resp.GetPendingActivities() {
		if _, ok := client.ActivityWait(a, nil, now); ok {
			waits = true
		}
	}
	if !waits {
		return nil, false
	}
	qs, _, err := cl.TaskQueues(ctx, "")
	if err != nil {
		return nil, false
	}
	return qs, true
}

// waitText says what a running workflow waits on when its workflow task
// waits in a queue ("workflow task waiting 5.9s on queue orders, no
// poller"); without the queues (known false) it does not say whether a
// worker polls. "" when it waits on no queue.
func waitText(wf *durablev1.WorkflowInfo, queues []*durablev1.TaskQueue, known bool, now time.Time) string {
	w, ok := client.WorkflowWait(wf, queues)
	if !ok {
		return ""
	}
	if !known {
		w.NoPoller = false
	}
	return w.String(now)
}

// overridesFor fetches the policy overrides when an activity has fields
// one sets, to say who set them and why; without them (an older daemon, a
// failed call) the fields are still marked.
func (c *cli) overridesFor(ctx context.Context, cl *client.Client, acts []*durablev1.PendingActivity) []*durablev1.PolicyOverride {
	for _, a := range acts {
		if len(a.GetOverriddenFields()) > 0 {
			list, err := cl.ListPolicyOverrides(ctx)
			if err != nil {
				return nil
			}
			return list
		}
	}
	return nil
}

// printPolicy writes the policy in force of one activity: its options in
// force, each field an override sets marked with the override's author and
// reason (once; "(override)" after that).
func printPolicy(w io.Writer, a *durablev1.PendingActivity, o *durablev1.PolicyOverride) {
	in := activity.OptionsInForce(a)
	overridden := map[string]bool{}
	for _, f := range a.GetOverriddenFields() {
		overridden[f] = true
	}
	said := false
	mark := func(field, text string) string {
		if !overridden[field] {
			return text
		}
		if said || o == nil {
			return text + " (override)"
		}
		said = true
		by := dash(o.GetPrincipal())
		if r := o.GetReason(); r != "" {
			return fmt.Sprintf("%s (override by %s: %q)", text, by, cut(r, 60))
		}
		return fmt.Sprintf("%s (override by %s)", text, by)
	}
	rp := in.GetRetryPolicy()
	maxAttempts := a.GetMaxAttempts()
	if maxAttempts <= 0 {
		maxAttempts = rp.GetMaxAttempts()
	}
	nonRetryable := "none"
	if list := rp.GetNonRetryable(); len(list) > 0 {
		nonRetryable = strings.Join(list, ", ")
	}
	factor := rp.GetBackoff()
	if !(factor >= 1) {
		factor = activity.DefaultBackoff
	}
	fmt.Fprintf(w, "Policy in force of %s (%s):\n", activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType()))
	fmt.Fprintf(w, "  %s\n", mark("retry_policy.max_attempts", fmt.Sprintf("max attempts %d", maxAttempts)))
	fmt.Fprintf(w, "  retry: %s · %s · %s · %s\n",
		mark("retry_policy.initial_ms", "initial "+human(activity.Backoff(rp, 1))),
		mark("retry_policy.backoff", "backoff ×"+strconv.FormatFloat(factor, 'g', -1, 64)),
		mark("retry_policy.max_interval_ms", "max interval "+human(activity.Backoff(rp, 1<<20))),
		mark("retry_policy.non_retryable", "non-retryable "+nonRetryable))
	fmt.Fprintf(w, "  timeouts: %s · %s · %s · %s\n",
		mark("start_to_close_timeout", "start-to-close "+spanOrNone(in.GetStartToCloseTimeout())),
		mark("heartbeat_timeout", "heartbeat "+spanOrNone(in.GetHeartbeatTimeout())),
		"schedule-to-start "+spanOrNone(in.GetScheduleToStartTimeout()),
		mark("schedule_to_close_timeout", "schedule-to-close "+spanOrNone(in.GetScheduleToCloseTimeout())))
}

// printSchedule writes when the activity tries again and when it gives up,
// under the policy printPolicy wrote: the attempt due next exactly, the
// later ones as upper bounds (the daemon draws a full jitter below each
// backoff).
func printSchedule(w io.Writer, a *durablev1.PendingActivity, now time.Time) {
	s := client.RetryScheduleOf(a, now)
	if !s.Known() {
		return
	}
	fmt.Fprintf(w, "  schedule: %s\n", s.Words(func(d time.Duration) string {
		if d <= 0 {
			return "0s"
		}
		return human(d)
	}))
}

// spanOrNone formats an optional timeout; unset and zero are "none".
func spanOrNone(d *durationpb.Duration) string {
	if d.AsDuration() <= 0 {
		return "none"
	}
	return human(d.AsDuration())
}

// printWorkflow writes a workflow as a key/value block.
func printWorkflow(w io.Writer, wf *durablev1.WorkflowInfo, waiting string, now time.Time) {
	t := table(w)
	row(t, "Workflow:", activity.EscapeID(wf.GetWorkflowId()))
	row(t, "Type:", activity.EscapeID(wf.GetWorkflowType()))
	row(t, "Task queue:", activity.EscapeID(wf.GetTaskQueue()))
	row(t, "Status:", workflowStatus(wf.GetStatus()))
	if waiting != "" {
		row(t, "Waiting:", waiting)
	}
	row(t, "Started:", stampAgo(wf.GetStartTime(), now))
	if wf.GetCloseTime() != nil {
		row(t, "Closed:", fmt.Sprintf("%s, took %s", stampAgo(wf.GetCloseTime(), now),
			human(wf.GetCloseTime().AsTime().Sub(wf.GetStartTime().AsTime()))))
	}
	row(t, "History:", fmt.Sprintf("%d events", wf.GetHistoryLength()))
	pending := "none"
	if n := wf.GetPendingActivities(); n > 0 {
		pending = fmt.Sprintf("%d %s, %d dead-lettered", n, plural(int(n), "activity", "activities"), wf.GetDeadLetters())
	}
	row(t, "Pending:", pending)
	if wf.GetStatus() == durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED {
		row(t, "Result:", dash(preview(wf.GetResult(), 200)))
	}
	if wf.GetFailure() != nil {
		row(t, "Failure:", failureText(wf.GetFailure()))
	}
	t.Flush()
}

// printActivities writes the pending activities table. With the task
// queues known, an activity due on a queue no worker polls says so.
func printActivities(w io.Writer, acts []*durablev1.PendingActivity, queues []*durablev1.TaskQueue, known bool, now time.Time) {
	t := table(w)
	row(t, "ACTIVITY", "TYPE", "STATE", "ATTEMPT", "NEXT", "LAST FAILURE", "HEARTBEAT", "DETAILS")
	for _, a := range acts {
		row(t, activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType()), activityState(a.GetState()),
			attemptOf(a), nextOrStalled(a, queues, known, now), dash(cut(failureText(a.GetLastFailure()), 50)),
			heartbeatAge(a, now), dash(preview(a.GetHeartbeatDetails(), 40)))
	}
	t.Flush()
}

// attemptOf is "n/max".
func attemptOf(a *durablev1.PendingActivity) string {
	max := "?"
	if a.GetMaxAttempts() > 0 {
		max = strconv.Itoa(int(a.GetMaxAttempts()))
	}
	return fmt.Sprintf("%d/%s", a.GetAttempt(), max)
}

// next says what happens next to an activity and when, in the words of
// wf's tables, from client.NextOf (the rule the console counts down by).
func next(a *durablev1.PendingActivity, now time.Time) string {
	n := client.NextOf(a, now)
	retry := a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_RETRYING
	switch n.Kind {
	case client.NextBackoff:
		if retry {
			return "retry " + relative(n.At, now)
		}
		return "runs " + relative(n.At, now)
	case client.NextDue:
		return "waiting for a worker"
	case client.NextOverdue:
		if retry {
			return "retry due " + human(n.Late()) + " ago, no worker yet"
		}
		return "due " + human(n.Late()) + " ago, no worker yet"
	case client.NextRunning:
		if !n.At.IsZero() {
			return "lease ends " + relative(n.At, now)
		}
	case client.NextLeaseExpired:
		return "lease expired " + human(n.Late()) + " ago"
	case client.NextDeadLettered:
		if !n.At.IsZero() {
			return "needs redrive (dead " + human(n.Late()) + ")"
		}
		return "needs redrive"
	}
	return "-"
}

// nextOrStalled is next, or "waiting 12s, no poller" for an activity due
// on a queue no worker polls.
func nextOrStalled(a *durablev1.PendingActivity, queues []*durablev1.TaskQueue, known bool, now time.Time) string {
	if known {
		if w, ok := client.ActivityWait(a, queues, now); ok && w.NoPoller {
			return "waiting " + human(max(now.Sub(w.Since), 0)) + ", no poller"
		}
	}
	return next(a, now)
}

// heartbeatAge is how long ago the last heartbeat came, "-" if none.
func heartbeatAge(a *durablev1.PendingActivity, now time.Time) string {
	if a.GetLastHeartbeatTime() == nil {
		return "-"
	}
	return relative(a.GetLastHeartbeatTime().AsTime(), now)
}

// printAttempts writes the last (all if last <= 0) attempts of one activity.
func printAttempts(w io.Writer, a *durablev1.PendingActivity, last int, now time.Time) {
	fmt.Fprintf(w, "Attempts of %s (%s), key %s", activity.EscapeID(a.GetActivityId()), activity.EscapeID(a.GetActivityType()), activity.EscapeID(a.GetIdempotencyKey()))
	if a.GetRedrives() > 0 {
		fmt.Fprintf(w, ", redriven %d×", a.GetRedrives())
	}
	fmt.Fprintln(w, ":")
	trail := a.GetAttempts()
	if len(trail) == 0 {
		fmt.Fprintln(w, "  none yet")
		return
	}
	hidden := int(a.GetAttemptsTruncated())
	if last > 0 && len(trail) > last {
		hidden += len(trail) - last
		trail = trail[len(trail)-last:]
	}
	if hidden > 0 {
		fmt.Fprintf(w, "  (%d earlier attempts not shown)\n", hidden)
	}
	t := table(w)
	row(t, "  #", "WORKER", "STARTED", "TOOK", "OUTCOME")
	for _, at := range trail {
		took, outcome := "-", "running"
		if at.GetEndedTime() != nil {
			took = human(at.GetEndedTime().AsTime().Sub(at.GetStartedTime().AsTime()))
			outcome = "completed"
			if at.GetFailure() != nil {
				outcome = cut(failureText(at.GetFailure()), 100)
			}
		} else if at.GetStartedTime() != nil {
			took = human(now.Sub(at.GetStartedTime().AsTime())) + " so far"
		}
		row(t, "  "+strconv.Itoa(int(at.GetAttempt())), dash(activity.EscapeID(at.GetIdentity())), stamp(at.GetStartedTime(), now), took, outcome)
	}
	t.Flush()
}
