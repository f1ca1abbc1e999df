package client

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Selection picks activities by the words an operator types, the same words
// with the same meaning in wf (--select) and in the console's filter bar:
//
//	type:Timeout        the last failure's type, exactly (not HeartbeatTimeout)
//	fp:3f2a9c1b7d4e     the last failure's fingerprint (wf dlq list --group)
//	act:ChargeCard      the activity type, exactly
//	wf:order-42         the workflow id, exactly; wf:order-* every id starting "order-"
//	queue:payments      the task queue, exactly
//	state:dead          scheduled, running, retrying or dead
//	attempt>=3          at attempt 3 or later
//	nopoller            due, and no worker polls its queue (MatchesOnQueues);
//	                    without the queues, due for more than NoPollerAfter
//	dead>=2026-12-01T06:00:00Z   dead-lettered at or after a time (RFC 3339)
//	dead<2026-12-01T07:00:00Z    dead-lettered before a time
//	anything else       text found in the workflow id, activity id or activity
//	                    type, ignoring case: for looking, not for acting on
//
// A value with spaces is quoted: wf:"night batch 7". Words are ANDed. Every field but the free text matches exactly and
// case-sensitively, as the daemon's filters do, so a selection that the
// daemon can apply (DeadLetterFilter, ListActivities) selects there exactly
// what Matches selects here. The zero Selection selects everything.
type Selection struct {
	// FailureType is the type of the activity's last failure.
	FailureType string
	// Fingerprint is the fingerprint of the last failure
	// (activity.Fingerprint).
	Fingerprint  string
	ActivityType string
	// WorkflowID is one workflow; WorkflowPrefix every workflow whose id
	// starts with it. At most one of the two is set.
	WorkflowID     string
	WorkflowPrefix string
	TaskQueue      string
	// State is one state; unspecified means any.
	State durablev1.ActivityState
	// MinAttempt leaves out activities at an earlier attempt.
	MinAttempt int32
	// NoPoller keeps only activities that are due and that no worker
	// polls for: by the daemon's task queues (MatchesOnQueues), or, without
	// them, due for more than NoPollerAfter and not taken (which a queue
	// whose workers are all busy also is). It depends on the time, so it is
	// checked on the activities the daemon returns.
	NoPoller bool
	// DeadAfter and DeadBefore, when set, keep only letters dead-lettered
	// at or after DeadAfter and before DeadBefore.
	DeadAfter, DeadBefore time.Time
	// Text holds free words, lower-cased: each must be a substring of the
	// workflow id, the activity id or the activity type.
	Text []string
}

// NoPollerAfter is how long a due activity may sit in its queue before it
// counts as waiting on a worker that does not come (the nopoller word).
const NoPollerAfter = 2 * time.Second

// maxSelectionAttempt bounds attempt>=N, as wf's --min-attempt always has.
const maxSelectionAttempt = 10000

// SelectionError is a word Parse could not read.
type SelectionError struct {
	// Word is the word as typed.
	Word string
	// Reason says what is wrong with it and what would be right.
	Reason string
}

func (e *SelectionError) Error() string { return fmt.Sprintf("%q: %s", e.Word, e.Reason) }

// stateWords are the words of state:, in the order they are listed.
var stateWords = []struct {
	word  string
	state durablev1.ActivityState
}{
	{"scheduled", durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED},
	{"running", durablev1.ActivityState_ACTIVITY_STATE_STARTED},
	{"retrying", durablev1.ActivityState_ACTIVITY_STATE_RETRYING},
	{"dead", durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED},
}

// stateAliases are other names state: takes.
var stateAliases = map[string]durablev1.ActivityState{
	"started":       durablev1.ActivityState_ACTIVITY_STATE_STARTED,
	"dead-lettered": durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED,
}

// keyAliases are the longer names of the keys, read as the short ones.
var keyAliases = map[string]string{
	"type": "type", "fail": "type", "failure": "type", "failure-type": "type",
	"fp": "fp", "fingerprint": "fp",
	"act": "act", "activity": "act", "activity-type": "act",
	"wf": "wf", "workflow": "wf",
	"queue": "queue", "task-queue": "queue",
	"state": "state",
}

// StateWord is the word state: takes for s ("dead"), empty for unspecified.
func StateWord(s durablev1.ActivityState) string {
	for _, w := range stateWords {
		if w.state == s {
			return w.word
		}
	}
	return ""
}

// ParseState reads a state word: scheduled, running (started), retrying or
// dead (dead-lettered).
func ParseState(word string) (durablev1.ActivityState, bool) {
	for _, w := range stateWords {
		if w.word == word {
			return w.state, true
		}
	}
	s, ok := stateAliases[word]
	return s, ok
}

// ParseSelection reads a selection from the words of text (see Selection).
// An error names the first word it could not read.
func ParseSelection(text string) (Selection, error) {
	var s Selection
	words, err := splitWords(text)
	if err != nil {
		return Selection{}, err
	}
	for _, w := range words {
		if err := s.AddWord(w); err != nil {
			return Selection{}, err
		}
	}
	return s, nil
}

// splitWords cuts text at spaces, except inside double quotes (Go syntax),
// which are removed: wf:"night batch 7" is one word.
func splitWords(text string) ([]string, error) {
	var words []string
	var b strings.Builder
	open := false
	for i := 0; i < len(text); {
		switch c := text[i]; c {
		case '"':
			q, err := strconv.QuotedPrefix(text[i:])
			if err != nil {
				return nil, &SelectionError{Word: text[i:], Reason: "a quote that does not end"}
			}
			v, _ := strconv.Unquote(q)
			b.WriteString(v)
			open, i = true, i+len(q)
		case ' ', '\t', '\n', '\r':
			if open {
				words = append(words, b.String())
				b.Reset()
				open = false
			}
			i++
		default:
			b.WriteByte(c)
			open, i = true, i+1
		}
	}
	if open {
		words = append(words, b.String())
	}
	return words, nil
}

// quoted is v as a word: quoted when it has a space or a quote.
func quoted(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n\r\"") {
		return strconv.Quote(v)
	}
	return v
}

// AddWord reads one word (unquoted) into s, as ParseSelection reads each:
// for a program that builds a selection from flags. The same word twice is
// one word; two different values for one key are an error.
func (s *Selection) AddWord(w string) error {
	bad := func(format string, args ...any) error {
		return &SelectionError{Word: w, Reason: fmt.Sprintf(format, args...)}
	}
	lw := strings.ToLower(w)
	switch {
	case lw == "nopoller" || lw == "no-poller":
		s.NoPoller = true
		return nil
	case strings.HasPrefix(lw, "attempt>="):
		n, err := strconv.Atoi(w[len("attempt>="):])
		if err != nil || n < 1 || n > maxSelectionAttempt {
			return bad("want attempt>=N with N from 1 to %d", maxSelectionAttempt)
		}
		if s.MinAttempt != 0 && s.MinAttempt != int32(n) {
			return bad("attempt>= is given twice")
		}
		s.MinAttempt = int32(n)
		return nil
	case strings.HasPrefix(lw, "attempt"):
		return bad("want attempt>=N: only at-least is supported")
	case strings.HasPrefix(lw, "dead>=") || strings.HasPrefix(lw, "dead<"):
		after := strings.HasPrefix(lw, "dead>=")
		v := strings.TrimPrefix(strings.TrimPrefix(w, "dead>="), "dead<")
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return bad("want an RFC 3339 time, as in dead>=2026-12-01T06:00:00Z")
		}
		bound := &s.DeadBefore
		if after {
			bound = &s.DeadAfter
		}
		if !bound.IsZero() && !bound.Equal(at) {
			return bad("the bound is given twice")
		}
		*bound = at.UTC()
		if !s.DeadAfter.IsZero() && !s.DeadBefore.IsZero() && !s.DeadBefore.After(s.DeadAfter) {
			return bad("dead< must be later than dead>=")
		}
		return nil
	}
	k, v, ok := strings.Cut(w, ":")
	if !ok {
		s.Text = append(s.Text, lw)
		return nil
	}
	key, known := keyAliases[strings.ToLower(k)]
	if !known {
		return bad("unknown key %s: want type:, fp:, act:, wf:, queue:, state:, attempt>=N or nopoller", k+":")
	}
	if v == "" {
		return bad("%s: needs a value", key)
	}
	if err := activity.CheckID(v); err != nil {
		return bad("the value %v", err)
	}
	if key != "wf" && strings.HasSuffix(v, "*") {
		return bad("%s: matches exactly; only wf: takes a trailing * (a prefix)", key)
	}
	twice := func(old string) error {
		if old != "" && old != v {
			return bad("%s: is already %s:%s; words are ANDed, so two values select nothing", key, key, old)
		}
		return nil
	}
	switch key {
	case "type":
		if err := twice(s.FailureType); err != nil {
			return err
		}
		s.FailureType = v
	case "fp":
		if err := twice(s.Fingerprint); err != nil {
			return err
		}
		if !isFingerprint(v) {
			return bad("a fingerprint is %d lower-case hex digits (the first column of wf dlq list --group)", activity.FingerprintLen)
		}
		s.Fingerprint = v
	case "act":
		if err := twice(s.ActivityType); err != nil {
			return err
		}
		s.ActivityType = v
	case "wf":
		old := s.WorkflowID
		if s.WorkflowPrefix != "" {
			old = s.WorkflowPrefix + "*"
		}
		if err := twice(old); err != nil {
			return err
		}
		if p, ok := strings.CutSuffix(v, "*"); ok {
			if p == "" || strings.Contains(p, "*") {
				return bad("wf: takes an id, or a prefix followed by one *")
			}
			s.WorkflowPrefix = p
		} else {
			s.WorkflowID = v
		}
	case "queue":
		if err := twice(s.TaskQueue); err != nil {
			return err
		}
		s.TaskQueue = v
	case "state":
		st, ok := ParseState(strings.ToLower(v))
		if !ok {
			return bad("want state:scheduled, state:running, state:retrying or state:dead")
		}
		if old := StateWord(s.State); old != "" && s.State != st {
			return bad("state: is already state:%s; words are ANDed, so two values select nothing", old)
		}
		s.State = st
	}
	return nil
}

func isFingerprint(v string) bool {
	if len(v) != activity.FingerprintLen {
		return false
	}
	for _, r := range v {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// String is the selection in canonical words, in a fixed order, which
// ParseSelection reads back as the same selection; empty for the zero one.
func (s Selection) String() string {
	var parts []string
	add := func(key, v string) {
		if v != "" {
			parts = append(parts, key+":"+quoted(v))
		}
	}
	add("type", s.FailureType)
	add("fp", s.Fingerprint)
	add("act", s.ActivityType)
	add("wf", s.WorkflowID)
	if s.WorkflowPrefix != "" {
		parts = append(parts, "wf:"+quoted(s.WorkflowPrefix)+"*")
	}
	add("queue", s.TaskQueue)
	add("state", StateWord(s.State))
	if s.MinAttempt > 0 {
		parts = append(parts, fmt.Sprintf("attempt>=%d", s.MinAttempt))
	}
	if s.NoPoller {
		parts = append(parts, "nopoller")
	}
	if !s.DeadAfter.IsZero() {
		parts = append(parts, "dead>="+s.DeadAfter.UTC().Format(time.RFC3339Nano))
	}
	if !s.DeadBefore.IsZero() {
		parts = append(parts, "dead<"+s.DeadBefore.UTC().Format(time.RFC3339Nano))
	}
	for _, t := range s.Text {
		parts = append(parts, quoted(t))
	}
	return strings.Join(parts, " ")
}

// IsZero reports whether s selects everything.
func (s Selection) IsZero() bool { return s.String() == "" }

// HasText reports whether s has free words, which match by substring: fine
// for looking, so a bulk action on such a selection must say so.
func (s Selection) HasText() bool { return len(s.Text) > 0 }
