package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const opsUsage = `Usage: wf ops list [--limit N]
       wf ops describe OPERATION_ID
       wf ops cancel OPERATION_ID [--reason R]

Operations are work the daemon does on an operator's behalf at its own
pace: today, redrive operations started by 'wf dlq redrive --all'. The
daemon runs them whatever happens to the wf that started them, and goes on
with them after a restart. Where several nodes share a database, NODE is the
node that runs each one; when that node dies or stops, another takes its
operations over within seconds and NODE changes.

list shows the newest first: state, who started it and when, progress
(released of matched, skipped, and how many of the released letters have
dead-lettered again since), the rate, what it selected and why.
describe shows one in full. cancel stops a running one: the letters it
released stay released, the rest stay in the dead-letter queue; once wf
says it is cancelled, the daemon releases nothing more of it. Cancelling
one that has finished exits 1. A cancel is in the audit log, with --reason.

Examples:
  wf ops list
  wf ops describe op-3
  wf ops cancel op-3 --reason "INC-1234: the fix did not hold"
  wf ops list --json | jq -r '.operations[] | select(.state == "OPERATION_STATE_RUNNING") | .id'
`

// opsDoc is the --json document of ops list.
type opsDoc struct {
	Operations []json.RawMessage `json:"operations"`
}

func (c *cli) ops(args []string) int {
	if len(args) == 0 {
		return c.usageError("ops", "want a subcommand: list, describe or cancel")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(c.stdout, opsUsage)
		return exitOK
	case "list":
		return c.opsList(args[1:])
	case "describe":
		return c.opsDescribe(args[1:])
	case "cancel":
		return c.opsCancel(args[1:])
	}
	return c.usageError("ops", fmt.Sprintf("unknown subcommand %q: want list, describe or cancel", args[0]))
}

func (c *cli) opsList(args []string) int {
	fs := c.flagSet("ops list", opsUsage)
	limit := fs.Int("limit", 50, "at most this many operations, the newest (0: all)")
	pos, code := c.parse(fs, "ops list", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("ops list", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	if *limit < 0 {
		return c.usageError("ops list", "--limit must be 0 (all) or more")
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	ops, err := cl.ListOperations(ctx, *limit)
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		doc := opsDoc{Operations: make([]json.RawMessage, 0, len(ops))}
		for _, op := range ops {
			doc.Operations = append(doc.Operations, rawProto(op))
		}
		return c.done(printJSON(c.stdout, doc))
	}
	if len(ops) == 0 {
		fmt.Fprintln(c.stdout, "No operations.")
		return exitOK
	}
	printOperations(c.stdout, ops, time.Now())
	n := len(ops)
	more := ""
	if *limit > 0 && n == *limit {
		more = fmt.Sprintf(" (the newest %d; --limit 0 for all)", n)
	}
	fmt.Fprintf(c.stdout, "%d %s%s\n", n, plural(n, "operation", "operations"), more)
	return exitOK
}

// printOperations writes operations as a table, a row each.
func printOperations(w io.Writer, ops []*durablev1.Operation, now time.Time) {
	t := table(w)
	// NODE only where nodes share a store and so name the one that runs
	// each operation.
	nodes := slices.ContainsFunc(ops, func(op *durablev1.Operation) bool { return op.GetNode() != "" })
	head := []string{"ID", "STATE", "STARTED", "BY", "PROGRESS", "RATE", "SELECTION", "REASON"}
	if nodes {
		head = slices.Insert(head, 2, "NODE")
	}
	row(t, head...)
	for _, op := range ops {
		cells := []string{op.GetId(), opState(op.GetState()), relative(op.GetStartedTime().AsTime(), now), dash(op.GetPrincipal()),
			opProgress(op), strconv.FormatFloat(op.GetRate(), 'f', -1, 64) + "/s", cut(opSelection(op), 50), dash(cut(op.GetReason(), 60))}
		if nodes {
			cells = slices.Insert(cells, 2, dash(op.GetNode()))
		}
		row(t, cells...)
	}
	t.Flush()
}

func (c *cli) opsDescribe(args []string) int {
	fs := c.flagSet("ops describe", opsUsage)
	pos, code := c.parse(fs, "ops describe", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError("ops describe", "want exactly one OPERATION_ID")
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	op, err := cl.DescribeOperation(ctx, pos[0])
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		return c.done(printProto(c.stdout, op))
	}
	printOperation(c.stdout, op, time.Now())
	return exitOK
}

func (c *cli) opsCancel(args []string) int {
	fs := c.flagSet("ops cancel", opsUsage)
	reason := fs.String("reason", "", "why, for the audit log")
	pos, code := c.parse(fs, "ops cancel", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError("ops cancel", "want exactly one OPERATION_ID")
	}
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	op, err := cl.CancelOperation(ctx, pos[0], *reason)
	if err != nil {
		return c.fail(err)
	}
	if c.g.json {
		return c.done(printProto(c.stdout, op))
	}
	fmt.Fprintln(c.stdout, opSummary(op))
	return exitOK
}

// printOperation writes an operation as a key/value block.
func printOperation(w io.Writer, op *durablev1.Operation, now time.Time) {
	t := table(w)
	row(t, "Operation:", op.GetId())
	row(t, "Kind:", dash(op.GetKind()))
	row(t, "State:", opState(op.GetState()))
	if n := op.GetNode(); n != "" {
		if op.GetState() == durablev1.OperationState_OPERATION_STATE_RUNNING {
			n += " (runs it; another node takes it over if this one is gone)"
		} else {
			n += " (ran it)"
		}
		row(t, "Node:", n)
	}
	row(t, "Started:", fmt.Sprintf("%s by %s (%s)", stampAgo(op.GetStartedTime(), now), dash(op.GetPrincipal()), dash(op.GetRole())))
	row(t, "Reason:", dash(op.GetReason()))
	row(t, "Selection:", opSelection(op))
	row(t, "Rate:", strconv.FormatFloat(op.GetRate(), 'f', -1, 64)+" letters/s")
	if op.GetEdit() != nil {
		row(t, "Edit:", patchText(op.GetEdit()))
	}
	row(t, "Matched:", strconv.FormatInt(op.GetMatched(), 10))
	row(t, "Released:", strconv.FormatInt(op.GetReleased(), 10))
	row(t, "Skipped:", fmt.Sprintf("%d (no longer dead-lettered when their turn came)", op.GetSkipped()))
	left := strconv.FormatInt(op.GetLeft(), 10)
	switch op.GetState() {
	case durablev1.OperationState_OPERATION_STATE_RUNNING:
		left += " (about " + human(releaseTime(op.GetLeft()+1, op.GetRate())) + " to go)"
	case durablev1.OperationState_OPERATION_STATE_CANCELLED:
		left += " (stay in the dead-letter queue)"
	}
	row(t, "Left:", left)
	row(t, "Dead again:", fmt.Sprintf("%d (released by it, dead-lettered since; not redriven again by it)", op.GetReDeadLettered()))
	if op.GetFinishedTime() != nil {
		row(t, "Finished:", fmt.Sprintf("%s, took %s", stampAgo(op.GetFinishedTime(), now),
			human(op.GetFinishedTime().AsTime().Sub(op.GetStartedTime().AsTime()))))
	}
	if op.GetState() == durablev1.OperationState_OPERATION_STATE_CANCELLED {
		row(t, "Cancelled by:", dash(op.GetCancelledBy()))
		row(t, "Cancel reason:", dash(op.GetCancelReason()))
	}
	row(t, "Audit record:", "#"+strconv.FormatInt(op.GetAuditId(), 10))
	t.Flush()
}

// opState is the lower-case state: running, completed, cancelled.
func opState(s durablev1.OperationState) string {
	return enumWord(s.String(), "OPERATION_STATE_")
}

// opSelection says what an operation selected: its filter, or the list.
func opSelection(op *durablev1.Operation) string {
	if op.GetListed() {
		return fmt.Sprintf("list of %d", op.GetMatched())
	}
	return filterText(op.GetFilter())
}

// opProgress is "released/matched", with the skipped and re-dead-lettered
// letters when there are any.
func opProgress(op *durablev1.Operation) string {
	parts := []string{fmt.Sprintf("%d/%d released", op.GetReleased(), op.GetMatched())}
	if n := op.GetSkipped(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped", n))
	}
	if n := op.GetReDeadLettered(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d dead again", n))
	}
	return strings.Join(parts, " · ")
}

// opProgressLine is the line --wait keeps rewriting.
func opProgressLine(op *durablev1.Operation) string {
	s := op.GetId() + " " + opState(op.GetState()) + ": " + opProgress(op)
	if op.GetState() == durablev1.OperationState_OPERATION_STATE_RUNNING && op.GetLeft() > 0 {
		s += " · ~" + human(releaseTime(op.GetLeft()+1, op.GetRate())) + " left"
	}
	return s
}

// opSummary says how an operation ended, or where it stands.
func opSummary(op *durablev1.Operation) string {
	took := ""
	if op.GetFinishedTime() != nil {
		verb := " · took "
		if op.GetState() == durablev1.OperationState_OPERATION_STATE_CANCELLED {
			verb = " · ran "
		}
		took = verb + human(op.GetFinishedTime().AsTime().Sub(op.GetStartedTime().AsTime()))
	}
	s := fmt.Sprintf("%s %s: %d of %d released", op.GetId(), opState(op.GetState()), op.GetReleased(), op.GetMatched())
	if n := op.GetSkipped(); n > 0 {
		s += fmt.Sprintf(", %d skipped", n)
	}
	if n := op.GetReDeadLettered(); n > 0 {
		s += fmt.Sprintf(", %d dead-lettered again", n)
	}
	if op.GetState() == durablev1.OperationState_OPERATION_STATE_CANCELLED {
		s += fmt.Sprintf(", %d left in the dead-letter queue; cancelled by %s", op.GetLeft(), dash(op.GetCancelledBy()))
		if r := op.GetCancelReason(); r != "" {
			s += fmt.Sprintf(" (%s)", r)
		}
	}
	return s + took
}
