package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// maxRate is the highest --rate the daemon takes, in letters per second.
const maxRate = 100000

// redriveDoc is the --json document of a single redrive.
type redriveDoc struct {
	// Redriven holds the letter put back, in its new state.
	Redriven []json.RawMessage `json:"redriven"`
	// Failed is empty: a redrive that fails exits 1 with the reason on
	// stderr. Kept for scripts written against the old document.
	Failed []redriveFailure `json:"failed"`
	// Matched and Count are 1.
	Matched int64 `json:"matched"`
	Count   int64 `json:"count"`
	// AuditID is the audit record of the redrive.
	AuditID int64 `json:"auditId,omitempty"`
}

type redriveFailure struct {
	WorkflowID string `json:"workflowId"`
	ActivityID string `json:"activityId"`
	Error      string `json:"error"`
}

// dryRunDoc is the --json document of dlq redrive --all --dry-run.
type dryRunDoc struct {
	// Matched is how many letters the filters select now.
	Matched int64 `json:"matched"`
	// Rate is the rate the operation would release them at (letters per
	// second), and Seconds how long that would take.
	Rate    float64 `json:"rate"`
	Seconds float64 `json:"seconds"`
	// Preview holds the first 100 letters, oldest first.
	Preview []json.RawMessage `json:"preview"`
}

// redriveArgs is what dlq redrive was asked to do.
type redriveArgs struct {
	sel    client.Selection
	rate   float64
	reason string
	edit   *durablev1.OptionsPatch
}

func (a redriveArgs) options() []client.RedriveOption {
	return []client.RedriveOption{client.WithReason(a.reason), client.WithRate(a.rate), client.WithEdit(a.edit)}
}

// rateOrDefault is the rate the daemon uses for a.
func (a redriveArgs) rateOrDefault() float64 {
	if a.rate > 0 {
		return a.rate
	}
	return 50
}

func (c *cli) dlqRedrive(args []string) int {
	fs := c.flagSet("dlq redrive", dlqUsage)
	flags := dlqSelection(fs)
	edits := registerPatchFlags(fs)
	all := fs.Bool("all", false, "start a redrive operation on every dead letter that matches the filters")
	rate := fs.Float64("rate", 0, "with --all: letters released per second (default: the daemon's, 50)")
	reason := fs.String("reason", "", "why, for the audit log and the workflow's history (an incident, a fix)")
	dryRun := fs.Bool("dry-run", false, "with --all: say what would match and how long the rate would take; start nothing")
	wait := fs.Bool("wait", false, "with --all: follow the operation until it is done; exit 0 completed, 1 cancelled")
	pos, code := c.parse(fs, "dlq redrive", args)
	if code >= 0 {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	sel, code := c.dlqSelectionOf("dlq redrive", flags)
	if code >= 0 {
		return code
	}
	edit, err := edits.patch()
	if err != nil {
		return c.usageError("dlq redrive", err.Error())
	}
	switch {
	case *all && len(pos) != 0:
		return c.usageError("dlq redrive", "give either WORKFLOW_ID ACTIVITY_ID or --all, not both")
	case !*all && len(pos) != 2:
		return c.usageError("dlq redrive", "want WORKFLOW_ID ACTIVITY_ID, or --all [filters]")
	case !*all && !sel.IsZero():
		return c.usageError("dlq redrive", "filters only apply with --all")
	case !*all && set["rate"]:
		return c.usageError("dlq redrive", "--rate only applies with --all")
	case !*all && (*dryRun || *wait):
		return c.usageError("dlq redrive", "--dry-run and --wait only apply with --all")
	case *dryRun && *wait:
		return c.usageError("dlq redrive", "give --dry-run or --wait, not both")
	case set["rate"] && !(*rate > 0 && *rate <= maxRate):
		return c.usageError("dlq redrive", fmt.Sprintf("--rate must be more than 0 and at most %d letters per second", maxRate))
	}
	a := redriveArgs{sel: sel, rate: *rate, reason: *reason, edit: edit}
	switch {
	case *dryRun:
		return c.redriveDryRun(a)
	case *all:
		return c.redriveAll(a, *wait)
	}
	return c.redriveOne(pos[0], pos[1], a)
}

// redriveOne is dlq redrive WORKFLOW_ID ACTIVITY_ID.
func (c *cli) redriveOne(workflowID, activityID string, a redriveArgs) int {
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	// The raw call, for the audit record's id that Client.Redrive drops.
	resp, err := cl.Service().RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{
		WorkflowId: workflowID, ActivityId: activityID, Reason: a.reason, Edit: a.edit,
	})
	if err != nil {
		return c.fail(fmt.Errorf("redrive %s/%s: %w", workflowID, activityID, err))
	}
	act := resp.GetActivity()
	if c.g.json {
		return c.done(printJSON(c.stdout, redriveDoc{
			Redriven: []json.RawMessage{rawProto(act)}, Failed: []redriveFailure{},
			Matched: 1, Count: 1, AuditID: resp.GetAuditId(),
		}))
	}
	with := ""
	if a.edit != nil {
		with = " with " + patchText(a.edit)
	}
	fmt.Fprintf(c.stdout, "redrove %s/%s (%s): queued as attempt %d%s · audit #%d\n",
		activity.EscapeID(act.GetWorkflowId()), activity.EscapeID(act.GetActivityId()), activity.EscapeID(act.GetActivityType()), act.GetAttempt(), with, resp.GetAuditId())
	return exitOK
}

// releaseTime is how long an operation takes to release n letters at rate:
// the first goes at once.
func releaseTime(n int64, rate float64) time.Duration {
	if n <= 1 || rate <= 0 {
		return 0
	}
	return time.Duration(float64(n-1) / rate * float64(time.Second))
}

// about says how long something takes, roughly: "about 6s", or "at once".
func about(d time.Duration) string {
	if d <= 0 {
		return "at once"
	}
	return "about " + human(d)
}

// redriveDryRun is dlq redrive --all --dry-run: what would match, the first
// letters, and how long the rate would take.
func (c *cli) redriveDryRun(a redriveArgs) int {
	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	resp, err := cl.RedriveSelectionDryRun(ctx, a.sel, a.options()...)
	if err != nil {
		return c.fail(err)
	}
	rate := a.rateOrDefault()
	took := releaseTime(resp.GetMatched(), rate)
	if c.g.json {
		doc := dryRunDoc{Matched: resp.GetMatched(), Rate: rate, Seconds: took.Seconds(), Preview: make([]json.RawMessage, 0, len(resp.GetPreview()))}
		for _, l := range resp.GetPreview() {
			doc.Preview = append(doc.Preview, rawProto(l))
		}
		return c.done(printJSON(c.stdout, doc))
	}
	sel := selectionText(a.sel)
	if resp.GetMatched() == 0 {
		if sel == "all" {
			fmt.Fprintln(c.stdout, "No dead letters; nothing would be redriven.")
		} else {
			fmt.Fprintf(c.stdout, "No dead letters match %s; nothing would be redriven.\n", sel)
		}
		return exitOK
	}
	printLetters(c.stdout, resp.GetPreview(), time.Now())
	if n := resp.GetMatched() - int64(len(resp.GetPreview())); n > 0 {
		fmt.Fprintf(c.stdout, "… and %d more\n", n)
	}
	with := ""
	if a.edit != nil {
		with = ", with " + patchText(a.edit)
	}
	fmt.Fprintf(c.stdout, "would redrive %d dead %s (%s) at %s/s%s: %s; nothing started\n", resp.GetMatched(),
		plural(int(resp.GetMatched()), "letter", "letters"), sel, strconv.FormatFloat(rate, 'f', -1, 64), with, about(took))
	return exitOK
}

// redriveAll is dlq redrive --all: it starts an operation and, with --wait,
// follows it until it is done. Without --wait it returns at once; with it,
// it runs until the operation is done unless --timeout is given, and Ctrl-C
// stops following, never the operation.
func (c *cli) redriveAll(a redriveArgs, wait bool) int {
	ctx, cl, done, code := c.connect(wait)
	if code >= 0 {
		return code
	}
	defer done()
	op, err := cl.RedriveSelection(ctx, a.sel, a.options()...)
	if errors.Is(err, client.ErrNoneSelected) {
		// Selected here (words the daemon has no field for): nothing
		// was started.
		if c.g.json {
			return c.done(printProto(c.stdout, &durablev1.Operation{}))
		}
		fmt.Fprintf(c.stdout, "No dead letters match %s; nothing to redrive, nothing started\n", selectionText(a.sel))
		return exitOK
	}
	if err != nil {
		return c.fail(err)
	}
	if !c.g.json {
		printStarted(c.stdout, op, a.sel)
		if op.GetMatched() > 0 {
			c.noteRunningBeside(ctx, cl, op)
		}
	}
	if !wait {
		if c.g.json {
			return c.done(printProto(c.stdout, op))
		}
		return exitOK
	}
	sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	line := newProgressLine(c.stderr)
	final, err := cl.WaitOperation(sctx, op.GetId(), func(op *durablev1.Operation) {
		line.show(opProgressLine(op))
	})
	line.end()
	if err != nil {
		if sctx.Err() != nil {
			why := "interrupted"
			if errors.Is(sctx.Err(), context.DeadlineExceeded) {
				why = "--timeout " + c.g.timeout.String() + " ran out"
			}
			fmt.Fprintf(c.stderr, "wf: stopped following %s (%s); it goes on in the daemon: 'wf ops describe %s', 'wf ops cancel %s'\n",
				op.GetId(), why, op.GetId(), op.GetId())
			return exitFailed
		}
		return c.fail(err)
	}
	if c.g.json {
		if code := c.done(printProto(c.stdout, final)); code != exitOK {
			return code
		}
	} else {
		fmt.Fprintln(c.stdout, opSummary(final))
	}
	if final.GetState() != durablev1.OperationState_OPERATION_STATE_COMPLETED {
		return exitFailed
	}
	return exitOK
}

// noteRunningBeside tells the operator of the other redrives running now:
// where two select the same letters, each releases a letter the other has
// not yet reached, so those go out at the sum of their rates, which is
// what the rate is there to prevent. A failure to list them says nothing.
func (c *cli) noteRunningBeside(ctx context.Context, cl *client.Client, started *durablev1.Operation) {
	ops, err := cl.ListOperations(ctx, 50)
	if err != nil {
		return
	}
	now := time.Now()
	for _, op := range ops {
		if op.GetId() == started.GetId() || op.GetState() != durablev1.OperationState_OPERATION_STATE_RUNNING {
			continue
		}
		fmt.Fprintf(c.stderr, "wf: note: %s is running too (%s, started %s by %s, %s/s); letters both select go out at the sum of the rates: 'wf ops cancel %s' stops it\n",
			op.GetId(), opSelection(op), relative(op.GetStartedTime().AsTime(), now), dash(op.GetPrincipal()),
			strconv.FormatFloat(op.GetRate(), 'f', -1, 64), op.GetId())
	}
}

// printStarted says what an operation that just started will do, naming
// the selection in its canonical words.
func printStarted(w io.Writer, op *durablev1.Operation, s client.Selection) {
	sel := selectionText(s)
	if op.GetListed() {
		sel += ", sent by name"
	}
	if op.GetMatched() == 0 {
		none := "No dead letters"
		if sel != "all" {
			none = "No dead letters match " + sel
		}
		fmt.Fprintf(w, "%s; nothing to redrive (%s completed at once · audit #%d)\n", none, op.GetId(), op.GetAuditId())
		return
	}
	with := ""
	if op.GetEdit() != nil {
		with = ", with " + patchText(op.GetEdit())
	}
	fmt.Fprintf(w, "started %s: redriving %d dead %s (%s) at %s/s%s, %s · audit #%d\n", op.GetId(), op.GetMatched(),
		plural(int(op.GetMatched()), "letter", "letters"), sel, strconv.FormatFloat(op.GetRate(), 'f', -1, 64), with,
		about(releaseTime(op.GetMatched(), op.GetRate())), op.GetAuditId())
	fmt.Fprintf(w, "follow it: wf ops describe %s · stop it: wf ops cancel %s\n", op.GetId(), op.GetId())
}

// progressLine shows progress on one line of a terminal, rewritten in
// place; on anything else (a log, a pipe) it writes a line at most every
// progressLogEvery, so that a script's log shows the operation moving
// without a line per letter.
type progressLine struct {
	w      *os.File
	other  io.Writer
	tty    bool
	last   time.Time
	shown  bool
	before int
}

const progressLogEvery = 5 * time.Second

func newProgressLine(w io.Writer) *progressLine {
	p := &progressLine{other: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.w, p.tty = f, true
		}
	}
	return p
}

func (p *progressLine) show(s string) {
	now := time.Now()
	switch {
	case p.tty:
		pad := ""
		if n := p.before - len(s); n > 0 {
			pad = fmt.Sprintf("%*s", n, "")
		}
		fmt.Fprintf(p.w, "\r%s%s", s, pad)
		p.before = len(s)
	case !p.shown || now.Sub(p.last) >= progressLogEvery:
		fmt.Fprintln(p.other, s)
		p.last = now
	default:
		return
	}
	p.shown = true
}

// end finishes the line, so what follows starts on a line of its own.
func (p *progressLine) end() {
	if p.tty && p.shown {
		fmt.Fprintln(p.w)
	}
}
