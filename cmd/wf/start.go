package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const startUsage = `
Usage: wf start TYPE [--id ID] [--task-queue Q] [--input JSON] [--wait] [--FIELD VALUE ...]

Starts a workflow of type TYPE. Flags that wf does not know become fields of
the JSON input: dashes turn into underscores, values that parse as a JSON
number, bool, object or array keep that type, anything else is a string, and
a bare --flag is true. They are merged over --input, which must then be a
JSON object.

With --wait, wf waits until the workflow closes and prints its result; it
exits 1, printing the failure, if the workflow failed.

Against a daemon run with --auth, only a worker principal allowed on the
task queue may start workflows, and only readers and operators may read
them: start with a worker's token, without --wait, then follow the workflow
with 'wf describe' under your own.

Examples:
  wf start FlakyDemo --fail-rate 0.5 --activities 3
      input {"activities":3,"fail_rate":0.5}
  wf start Backfill --id backfill-2024 --input '{"from":"2024-01-01"}' --dry-run
      input {"dry_run":true,"from":"2024-01-01"}
  wf start FlakyDemo --wait --timeout 5m
`

// startDoc is start's --json document.
type startDoc struct {
	WorkflowID   string          `json:"workflowId"`
	WorkflowType string          `json:"workflowType"`
	TaskQueue    string          `json:"taskQueue"`
	Input        json.RawMessage `json:"input,omitempty"`
	// Set with --wait.
	Status  string          `json:"status,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Failure json.RawMessage `json:"failure,omitempty"`
}

func (c *cli) start(args []string) int {
	fs := c.flagSet("start", startUsage)
	id := fs.String("id", "", "workflow id (default: random); starting an existing id fails")
	queue := fs.String("task-queue", client.DefaultTaskQueue, "task queue whose workers run the workflow")
	input := fs.String("input", "", "workflow input as JSON")
	wait := fs.Bool("wait", false, "wait for the result and print it; exit 1 if the workflow failed")

	known, fields, err := splitInputFlags(args, fs.Lookup)
	if err != nil {
		return c.usageError("start", err.Error())
	}
	pos, code := c.parse(fs, "start", known)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return c.usageError("start", "want exactly one workflow TYPE")
	}
	payload, err := buildInput(*input, fields)
	if err != nil {
		return c.usageError("start", err.Error())
	}

	ctx, cl, done, code := c.connect(*wait)
	if code >= 0 {
		return code
	}
	defer done()

	var in any
	if payload != nil {
		in = payload
	}
	r, err := cl.Start(ctx, pos[0], in, client.StartOptions{ID: *id, TaskQueue: *queue})
	if err != nil {
		return c.fail(err)
	}
	doc := startDoc{WorkflowID: r.ID, WorkflowType: pos[0], TaskQueue: *queue, Input: payload}
	if !*wait {
		if c.g.json {
			return c.done(printJSON(c.stdout, doc))
		}
		fmt.Fprintf(c.stdout, "started %s %s on queue %s\n", pos[0], r.ID, *queue)
		return exitOK
	}

	if !c.g.json {
		// stderr, so that stdout stays the result alone for a pipe.
		fmt.Fprintf(c.stderr, "started %s %s on queue %s; waiting for its result\n", pos[0], r.ID, *queue)
	}
	var result json.RawMessage
	err = r.Get(ctx, &result)
	var wfe *client.WorkflowFailedError
	switch {
	case errors.As(err, &wfe):
		doc.Status = workflowStatus(durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED)
		doc.Failure = rawProto(wfe.Failure)
		if c.g.json {
			printJSON(c.stdout, doc)
		}
		fmt.Fprintf(c.stderr, "wf: workflow %s failed: %s\n", r.ID, failureText(wfe.Failure))
		return exitFailed
	case err != nil:
		return c.fail(err)
	}
	doc.Status = workflowStatus(durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED)
	doc.Result = result
	if c.g.json {
		return c.done(printJSON(c.stdout, doc))
	}
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	var buf bytes.Buffer
	if json.Indent(&buf, result, "", "  ") != nil {
		buf.Reset()
		buf.Write(result)
	}
	fmt.Fprintf(c.stdout, "%s\n", buf.String())
	return exitOK
}

// done turns an output error (a closed pipe) into an exit code.
func (c *cli) done(err error) int {
	if err != nil {
		fmt.Fprintf(c.stderr, "wf: write output: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// inputField is one unknown flag of wf start, turned into an input field.
type inputField struct {
	name  string
	value any
}

// splitInputFlags separates the flags wf start knows from the ones after
// TYPE that become input fields. lookup finds a known flag by name. Known
// flags (with their values) and positional arguments are returned in order for
// flag.Parse; unknown flags before TYPE are kept there too, so that they fail
// as usage errors; everything after "--" is left alone.
func splitInputFlags(args []string, lookup func(string) *flag.Flag) (known []string, fields []inputField, err error) {
	seenType := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(known, args[i:]...), fields, nil
		}
		if len(a) < 2 || a[0] != '-' || isNumber(a) {
			seenType = true
			known = append(known, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "" {
			return nil, nil, fmt.Errorf("bad flag %q", a)
		}
		if f := lookup(name); f != nil || name == "h" || name == "help" || !seenType {
			known = append(known, a)
			if f != nil && !hasValue && !isBool(f) && i+1 < len(args) {
				known = append(known, args[i+1])
				i++
			}
			continue
		}
		if !hasValue && i+1 < len(args) && (args[i+1] == "" || args[i+1][0] != '-' || isNumber(args[i+1])) {
			value, hasValue = args[i+1], true
			i++
		}
		f := inputField{name: strings.ReplaceAll(name, "-", "_"), value: true}
		if hasValue {
			f.value = parseValue(value)
		}
		fields = append(fields, f)
	}
	return known, fields, nil
}

// isBool reports whether f is a flag that takes no value (--wait).
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// isNumber reports whether s is a JSON number, so that "--delta -1" reads -1
// as a value, not as a flag.
func isNumber(s string) bool {
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// parseValue keeps a JSON number (exactly, as written), bool, object or
// array; anything else is a string.
func parseValue(s string) any {
	t := strings.TrimSpace(s)
	if t == "true" || t == "false" || isNumber(t) || (strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[")) && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	return s
}

// buildInput merges fields over the JSON object in input and returns the
// payload, or nil when there is no input at all.
func buildInput(input string, fields []inputField) (json.RawMessage, error) {
	if input != "" && !json.Valid([]byte(input)) {
		return nil, fmt.Errorf("--input is not valid JSON: %s", cut(input, 40))
	}
	if len(fields) == 0 {
		if input == "" {
			return nil, nil
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(input)); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	obj := map[string]any{}
	if input != "" {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(input), &m); err != nil || m == nil {
			return nil, errors.New("--input must be a JSON object when input flags are given")
		}
		for k, v := range m {
			obj[k] = v
		}
	}
	for _, f := range fields {
		obj[f.name] = f.value
	}
	return json.Marshal(obj)
}
