package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/tinyllm/durable/client"
)

// selectionHelp is the part of a command's help about --select; the console
// reads the same words in its filter bar.
const selectionHelp = `Selection words (--select, and the console's / filter): ANDed, each exact
  type:T        the last failure's type (type:Timeout is not HeartbeatTimeout)
  fp:F          the last failure's fingerprint (the first column of --group)
  act:A         the activity type
  wf:ID         one workflow; wf:order-* every workflow id starting "order-"
  queue:Q       the task queue
  state:S       scheduled, running, retrying or dead
  attempt>=N    at attempt N or later
  nopoller      due, and no worker polls its queue for activities (wf asks
                the daemon's task queues, as 'wf queues' shows them)
  dead>=TIME dead<TIME   dead-lettered in a window (RFC 3339)
  other words   text in a workflow id, activity id or type, ignoring case
A value with spaces is quoted: wf:"night batch 7". Each filter flag is the
same as its word, and a flag and a word for the same field must agree.
`

// selectionFlags are the flags that narrow a list or a redrive: one per
// selection word, and --select for the words themselves, so that
// --failure-type Timeout and --select type:Timeout are one selection.
type selectionFlags struct {
	fs    *flag.FlagSet
	words string
	// flag name → the key of its word.
	keys       map[string]string
	values     map[string]*string
	minAttempt int
	deadAfter  time.Time
	deadBefore time.Time
}

// registerSelection registers --select and the flags of keys (flag name →
// word key) on fs; dead adds --dead-after and --dead-before, attempt
// --min-attempt.
func registerSelection(fs *flag.FlagSet, keys map[string]string, usage map[string]string, dead, attempt bool) *selectionFlags {
	f := &selectionFlags{fs: fs, keys: keys, values: map[string]*string{}}
	fs.StringVar(&f.words, "select", "", "selection `words`, as in the console's filter: 'type:Timeout attempt>=3' (see above)")
	for name := range keys {
		f.values[name] = fs.String(name, "", usage[name])
	}
	if dead {
		fs.Var(instantFlag{&f.deadAfter}, "dead-after", "only dead letters dead-lettered at or after this `time`: a span back from now (90m, 24h, 7d) or an RFC 3339 time")
		fs.Var(instantFlag{&f.deadBefore}, "dead-before", "only dead letters dead-lettered before this `time` (as --dead-after)")
	}
	if attempt {
		fs.IntVar(&f.minAttempt, "min-attempt", 0, "only activities at this attempt or later (the word attempt>=N)")
	}
	return f
}

// dlqSelection registers the selection flags of dlq list and dlq redrive.
func dlqSelection(fs *flag.FlagSet) *selectionFlags {
	return registerSelection(fs,
		map[string]string{"workflow": "wf", "activity-type": "act", "failure-type": "type", "fingerprint": "fp"},
		map[string]string{
			"workflow":      "only dead letters of this workflow (the word wf:ID)",
			"activity-type": "only dead letters of this activity type (act:T)",
			"failure-type":  "only dead letters whose last failure has exactly this type (type:T)",
			"fingerprint":   "only dead letters whose last failure has this fingerprint, from dlq list --group (fp:F)",
		}, true, false)
}

// selection is the selection the flags and --select make together. An
// error names the word or the flag.
func (f *selectionFlags) selection() (client.Selection, error) {
	sel, err := client.ParseSelection(f.words)
	if err != nil {
		return client.Selection{}, fmt.Errorf("--select: %w", err)
	}
	var ferr error
	f.fs.Visit(func(fl *flag.Flag) {
		if ferr != nil {
			return
		}
		word := ""
		switch {
		case f.keys[fl.Name] != "":
			word = f.keys[fl.Name] + ":" + *f.values[fl.Name]
		case fl.Name == "min-attempt" && f.minAttempt > 0:
			word = "attempt>=" + strconv.Itoa(f.minAttempt)
		case fl.Name == "dead-after":
			ferr = setBound(&sel.DeadAfter, f.deadAfter, "--dead-after", "dead>=")
		case fl.Name == "dead-before":
			ferr = setBound(&sel.DeadBefore, f.deadBefore, "--dead-before", "dead<")
		}
		if word == "" || ferr != nil {
			return
		}
		if err := sel.AddWord(word); err != nil {
			var se *client.SelectionError
			if errors.As(err, &se) {
				ferr = fmt.Errorf("--%s %s: %s", fl.Name, fl.Value, se.Reason)
			} else {
				ferr = fmt.Errorf("--%s: %w", fl.Name, err)
			}
		}
	})
	if ferr != nil {
		return client.Selection{}, ferr
	}
	if !sel.DeadAfter.IsZero() && !sel.DeadBefore.IsZero() && !sel.DeadBefore.After(sel.DeadAfter) {
		return client.Selection{}, errors.New("--dead-before must be later than --dead-after")
	}
	return sel, nil
}

// setBound sets a dead-lettered bound from its flag, unless --select gave
// another.
func setBound(bound *time.Time, v time.Time, flagName, word string) error {
	if !bound.IsZero() && !bound.Equal(v) {
		return fmt.Errorf("%s and --select %s disagree", flagName, word+bound.Format(time.RFC3339Nano))
	}
	*bound = v
	return nil
}

// selectionText is a selection in its canonical words, or "all".
func selectionText(s client.Selection) string {
	if s.IsZero() {
		return "all"
	}
	return s.String()
}
