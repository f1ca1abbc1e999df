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

const policyUsage = `Usage: wf policy set TYPE [--task-queue Q] [option flags] --reason R
       wf policy list
       wf policy clear TYPE [--task-queue Q] --reason R

A policy override replaces retry policy and timeout fields for the
activities of one type, without redeploying the workers: pending activities
follow it from their next decision (the retry after a failure, the lease of
a running attempt, the dead letter) and new ones from the start. Fields the
override does not name stay as the workflow code set them. An override for
a type on one task queue (--task-queue) wins over one for the type alone.
Setting again replaces the override; clearing it gives the activities their
code's options back, again from their next decision.

'wf describe' and 'wf stats' show the policy in force and which fields an
override set. Every set and clear goes to the audit log with --reason.

Option flags (only those given are overridden):
` + patchFlagsHelp + `
Examples:
  wf policy set ChargeCard --max-attempts 6 --initial 30s --reason "INC-7: card API flapping"
  wf policy set ChargeCard --task-queue eu --start-to-close 2m --reason "INC-7: EU region slow"
  wf policy set ChargeCard --non-retryable "" --reason "retry declines too while the fraud model is off"
  wf policy list
  wf policy clear ChargeCard --reason "INC-7 resolved"
  wf stats --type ChargeCard --check-policy      # the policy in force against P95/P99
`

func (c *cli) policy(args []string) int {
	if len(args) == 0 {
		return c.usageError("policy", "want a subcommand: set, list or clear")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.stdout, policyUsage)
		return exitOK
	case "set":
		return c.policySet(args[1:])
	case "list":
		return c.policyList(args[1:])
	case "clear":
		return c.policyClear(args[1:])
	}
	return c.usageError("policy", fmt.Sprintf("unknown subcommand %q: want set, list or clear", args[0]))
}

func (c *cli) policySet(args []string) int {
	fs := c.flagSet("policy set", policyUsage)
	queue := fs.String("task-queue", "", "only activities on this task queue (default: every queue)")
	reason := fs.String("reason", "", "why, for the audit log (required): an incident, a ticket")
	edit := registerPatchFlags(fs)
	pos, code := c.parse(fs, "policy set", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError("policy set", "want exactly one activity TYPE")
	}
	patch, err := edit.patch()
	switch {
	case err != nil:
		return c.usageError("policy set", err.Error())
	case patch == nil:
		return c.usageError("policy set", "name at least one field to override, such as --max-attempts or --start-to-close")
	case *reason == "":
		return c.usageError("policy set", "--reason is required: say why, for whoever reads the audit log")
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	o, err := cl.SetPolicyOverride(ctx, client.PolicyTarget{ActivityType: pos[0], TaskQueue: *queue}, patch, *reason)
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		return c.done(printProto(c.stdout, o))
	}
	fmt.Fprintf(c.stdout, "policy override of %s set: %s · audit #%d\n", overrideTarget(o), patchText(o.GetPatch()), o.GetAuditId())
	fmt.Fprintln(c.stdout, "Pending activities follow it from their next decision, new ones from the start.")
	return exitOK
}

// policyListDoc is the --json document of policy list.
type policyListDoc struct {
	Overrides []json.RawMessage `json:"overrides"`
}

func (c *cli) policyList(args []string) int {
	fs := c.flagSet("policy list", policyUsage)
	pos, code := c.parse(fs, "policy list", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("policy list", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	list, err := cl.ListPolicyOverrides(ctx)
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		doc := policyListDoc{Overrides: make([]json.RawMessage, 0, len(list))}
		for _, o := range list {
			doc.Overrides = append(doc.Overrides, rawProto(o))
		}
		return c.done(printJSON(c.stdout, doc))
	}
	if len(list) == 0 {
		fmt.Fprintln(c.stdout, "No policy overrides: every activity runs with its code's options.")
		return exitOK
	}
	printOverrides(c.stdout, list, time.Now())
	fmt.Fprintf(c.stdout, "%d policy %s\n", len(list), plural(len(list), "override", "overrides"))
	return exitOK
}

// printOverrides writes the overrides table.
func printOverrides(w io.Writer, list []*durablev1.PolicyOverride, now time.Time) {
	t := table(w)
	row(t, "TYPE", "TASK QUEUE", "OVERRIDES", "BY", "SET", "AUDIT", "REASON")
	for _, o := range list {
		queue := activity.EscapeID(o.GetTaskQueue())
		if queue == "" {
			queue = "(all)"
		}
		row(t, activity.EscapeID(o.GetActivityType()), queue, patchText(o.GetPatch()), dash(o.GetPrincipal()),
			ago(o.GetUpdatedTime().AsTime(), now), "#"+fmt.Sprint(o.GetAuditId()), dash(cut(o.GetReason(), 60)))
	}
	t.Flush()
}

func (c *cli) policyClear(args []string) int {
	fs := c.flagSet("policy clear", policyUsage)
	queue := fs.String("task-queue", "", "the override for this task queue (default: the one for every queue)")
	reason := fs.String("reason", "", "why, for the audit log (required)")
	pos, code := c.parse(fs, "policy clear", args)
	if code >= 0 {
		return code
	}
	switch {
	case len(pos) != 1:
		return c.usageError("policy clear", "want exactly one activity TYPE")
	case *reason == "":
		return c.usageError("policy clear", "--reason is required: say why, for whoever reads the audit log")
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	resp, err := cl.ClearPolicyOverride(ctx, client.PolicyTarget{ActivityType: pos[0], TaskQueue: *queue}, *reason)
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		return c.done(printProto(c.stdout, resp))
	}
	o := resp.GetCleared()
	fmt.Fprintf(c.stdout, "policy override of %s cleared (it set %s) · audit #%d\n", overrideTarget(o), patchText(o.GetPatch()), resp.GetAuditId())
	fmt.Fprintln(c.stdout, "Pending activities have their code's options again from their next decision.")
	return exitOK
}

// overrideTarget names what an override applies to: "ChargeCard on every
// task queue", "ChargeCard on task queue eu".
func overrideTarget(o *durablev1.PolicyOverride) string {
	return activity.EscapeID(o.GetActivityType()) + " on " + queueText(o.GetTaskQueue())
}

// queueText names an override's task queue; "" is every queue.
func queueText(q string) string {
	if q == "" {
		return "every task queue"
	}
	return "task queue " + activity.EscapeID(q)
}

// ago is how long before now t was, "-" for an unset time.
func ago(t, now time.Time) string {
	if t.IsZero() || t.Unix() == 0 {
		return "-"
	}
	return relative(t, now)
}
