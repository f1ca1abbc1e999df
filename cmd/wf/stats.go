package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const statsUsage = `
Usage: wf stats [--type T] [--since DUR] [--check-policy [option flags]]

Prints attempt latency per activity type (P50, P95, P99, max) with the
timeouts they suggest: start-to-close ≈ 2 × P99, initial backoff ≈ P95.
--since narrows the window the numbers come from to the attempts that ended
in its last span (7d, 36h, or an RFC 3339 time); the daemon keeps durations
by the hour for its --stats-retention (30 days by default), so the window
starts at the top of the hour. Without --since, every attempt counts.

With --check-policy (implied by any option flag), wf checks each type's
policy in force (the options of its newest activity, with its policy
override applied: see 'wf policy') against those numbers, and exits 1 if a
check warns:
  - start-to-close below P99 times out over 1% of healthy attempts; below
    2 × P99 leaves no headroom;
  - an initial backoff under half of P95 retries before a slow downstream
    has recovered;
  - a max interval above start-to-close lets retry waits grow past the
    attempts they separate;
  - a schedule-to-close budget shorter than every attempt plus every wait
    dead-letters before max attempts are used.
Option flags replace fields of the policy in force, to ask "what if" before
setting an override; a type the daemon has no options for yet is checked
with its defaults (1s, ×2, 60s, 5 attempts).

Option flags:
` + patchFlagsHelp + `
Examples:
  wf stats
  wf stats --since 7d --check-policy
  wf stats --type ChargeCard --since 30d --check-policy --start-to-close 2s --initial 500ms
  wf stats --json | jq '.stats[] | {activityType, p99}'
`

// statsDoc is stats's --json document.
type statsDoc struct {
	// Since is the start of the window asked for (RFC 3339), if any.
	Since    string            `json:"since,omitempty"`
	Stats    []json.RawMessage `json:"stats"`
	Checks   []policyCheck     `json:"checks,omitempty"`
	Policies []checkedPolicy   `json:"policies,omitempty"`
}

// checkedPolicy is the policy --check-policy checked for one type.
type checkedPolicy struct {
	ActivityType string          `json:"activityType"`
	Options      json.RawMessage `json:"options"`
	// OverriddenFields come from a policy override, WhatIfFields from the
	// option flags; every other field from the code or the defaults.
	OverriddenFields []string `json:"overriddenFields"`
	WhatIfFields     []string `json:"whatIfFields"`
}

// policyCheck is one finding of --check-policy.
type policyCheck struct {
	ActivityType string `json:"activityType"`
	Check        string `json:"check"`
	// Result is "ok" or "warn".
	Result string `json:"result"`
	Note   string `json:"note"`
}

// policyFlags are the policy to check; zero means the daemon's default.
type policyFlags struct {
	startToClose, scheduleToClose time.Duration
	initial, maxInterval          time.Duration
	backoff                       float64
	maxAttempts                   int
	// from says where a field came from ("override", "--flag"), by the
	// field path of durable.proto; the code's fields are not in it.
	from map[string]string
}

func (c *cli) stats(args []string) int {
	fs := c.flagSet("stats", statsUsage)
	typ := fs.String("type", "", "only this activity type")
	since := fs.String("since", "", "only attempts of this last span: a duration (36h), days (7d) or an RFC 3339 time")
	check := fs.Bool("check-policy", false, "check each type's policy in force (or as the option flags change it) against the observed latency")
	whatIf := registerPatchFlags(fs)
	pos, code := c.parse(fs, "stats", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("stats", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	patch, err := whatIf.patch()
	if err != nil {
		return c.usageError("stats", err.Error())
	}
	*check = *check || patch != nil
	from, err := parseSince(*since, time.Now())
	if err != nil {
		return c.usageError("stats", err.Error())
	}

	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	var opts []client.StatsOption
	if !from.IsZero() {
		opts = append(opts, client.StatsSince(from))
	}
	all, err := cl.Stats(ctx, opts...)
	if err != nil {
		return c.fail(err)
	}
	var stats []*durablev1.ActivityTypeStats
	for _, s := range all {
		if *typ == "" || s.GetActivityType() == *typ {
			stats = append(stats, s)
		}
	}
	var checks []policyCheck
	var checked []checkedPolicy
	policies := map[string]policyFlags{}
	if *check {
		for _, s := range stats {
			opts, p := policyOf(s, patch)
			policies[s.GetActivityType()] = p
			checks = append(checks, checkPolicy(s, p)...)
			checked = append(checked, checkedPolicy{
				ActivityType: s.GetActivityType(), Options: rawProto(opts),
				OverriddenFields: p.fields("override"), WhatIfFields: p.whatIfFields(),
			})
		}
	}
	warned := false
	for _, ch := range checks {
		warned = warned || ch.Result == "warn"
	}
	result := exitOK
	if warned {
		result = exitFailed
	}

	if c.g.json {
		doc := statsDoc{Stats: []json.RawMessage{}, Checks: checks, Policies: checked}
		if !from.IsZero() {
			doc.Since = from.UTC().Format(time.RFC3339)
		}
		for _, s := range stats {
			doc.Stats = append(doc.Stats, rawProto(s))
		}
		if err := printJSON(c.stdout, doc); err != nil {
			return c.done(err)
		}
		return result
	}
	if len(stats) == 0 {
		if !from.IsZero() {
			fmt.Fprintf(c.stdout, "No activity attempts ended since %s.\n", windowStart(from))
		} else {
			fmt.Fprintln(c.stdout, "No activity attempts recorded yet.")
		}
		return exitOK
	}
	if !from.IsZero() {
		fmt.Fprintf(c.stdout, "Attempts that ended since %s:\n", windowStart(from))
	}
	t := table(c.stdout)
	row(t, "TYPE", "ATTEMPTS", "FAILURES", "P50", "P95", "P99", "MAX", "SUGGESTED START-TO-CLOSE", "SUGGESTED INITIAL")
	for _, s := range stats {
		row(t, activity.EscapeID(s.GetActivityType()), strconv.FormatInt(s.GetAttempts(), 10), strconv.FormatInt(s.GetFailures(), 10),
			dur(s.GetP50()), dur(s.GetP95()), dur(s.GetP99()), dur(s.GetMax()),
			human(2*s.GetP99().AsDuration()), human(s.GetP95().AsDuration()))
	}
	t.Flush()
	if !*check {
		return exitOK
	}
	fmt.Fprintln(c.stdout)
	for _, s := range stats {
		name := s.GetActivityType()
		fmt.Fprintf(c.stdout, "Policy of %s: %s\n", activity.EscapeID(name), policies[name].describe(s.GetOptionsInForce() == nil))
	}
	fmt.Fprintln(c.stdout)
	t = table(c.stdout)
	row(t, "TYPE", "CHECK", "RESULT", "NOTE")
	for _, ch := range checks {
		row(t, ch.ActivityType, ch.Check, ch.Result, ch.Note)
	}
	t.Flush()
	if warned {
		fmt.Fprintln(c.stderr, "wf: the policy does not fit the observed latency (see the warnings above)")
	}
	return result
}

// windowStart is where a stats window begins: the top of since's hour, as
// the daemon counts by the hour.
func windowStart(since time.Time) string {
	return since.UTC().Truncate(time.Hour).Format("2006-01-02 15:04Z")
}

// policyOf is the policy to check for a type: its options in force, with the
// what-if patch applied over them (engine.ApplyPatch, the one meaning of a
// patch), and where each field came from.
func policyOf(s *durablev1.ActivityTypeStats, whatIf *durablev1.OptionsPatch) (*durablev1.ActivityOptions, policyFlags) {
	opts, flagged := engine.ApplyPatch(s.GetOptionsInForce(), whatIf)
	p := policyFlags{from: map[string]string{}}
	for _, f := range s.GetOverriddenFields() {
		p.from[f] = "override"
	}
	for _, f := range flagged {
		p.from[f] = "--" + flagOfField[f]
	}
	rp := opts.GetRetryPolicy()
	p.startToClose = opts.GetStartToCloseTimeout().AsDuration()
	p.scheduleToClose = opts.GetScheduleToCloseTimeout().AsDuration()
	p.initial = time.Duration(rp.GetInitialMs()) * time.Millisecond
	p.maxInterval = time.Duration(rp.GetMaxIntervalMs()) * time.Millisecond
	p.backoff = rp.GetBackoff()
	p.maxAttempts = int(rp.GetMaxAttempts())
	if p.maxAttempts <= 0 {
		p.maxAttempts = 5
	}
	return opts, p
}

// flagOfField names the option flag of each field a patch can set.
var flagOfField = map[string]string{
	"retry_policy.initial_ms":      "initial",
	"retry_policy.backoff":         "backoff",
	"retry_policy.max_interval_ms": "max-interval",
	"retry_policy.max_attempts":    "max-attempts",
	"retry_policy.non_retryable":   "non-retryable",
	"start_to_close_timeout":       "start-to-close",
	"heartbeat_timeout":            "heartbeat-timeout",
	"schedule_to_close_timeout":    "schedule-to-close",
}

// fields returns the fields that came from origin, in a fixed order.
func (p policyFlags) fields(origin string) []string {
	out := []string{}
	for _, f := range slices.Sorted(maps.Keys(p.from)) {
		if p.from[f] == origin {
			out = append(out, f)
		}
	}
	return out
}

// whatIfFields returns the fields the option flags set.
func (p policyFlags) whatIfFields() []string {
	out := []string{}
	for _, f := range slices.Sorted(maps.Keys(p.from)) {
		if strings.HasPrefix(p.from[f], "--") {
			out = append(out, f)
		}
	}
	return out
}

// mark is " (override)" or " (--flag)" for a field that did not come from
// the code.
func (p policyFlags) mark(field string) string {
	if from := p.from[field]; from != "" {
		return " (" + from + ")"
	}
	return ""
}

// dur formats an optional proto duration.
func dur(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	return human(d.AsDuration())
}

// retryPolicy is p as the proto message the retry arithmetic takes.
func (p policyFlags) retryPolicy() *durablev1.RetryPolicy {
	return &durablev1.RetryPolicy{
		InitialMs:     p.initial.Milliseconds(),
		Backoff:       p.backoff,
		MaxIntervalMs: p.maxInterval.Milliseconds(),
		MaxAttempts:   int32(p.maxAttempts),
	}
}

// describe summarises the policy and its retry waits before jitter, marking
// the fields an override or an option flag set; unknown says the daemon had
// no options for the type, so the defaults stand in for the code's.
func (p policyFlags) describe(unknown bool) string {
	delays := activity.RetryDelays(p.retryPolicy(), p.maxAttempts)
	var total time.Duration
	var parts []string
	for i := 0; i < len(delays); {
		j := i
		for j < len(delays) && delays[j] == delays[i] {
			total += delays[j]
			j++
		}
		if n := j - i; n > 1 {
			parts = append(parts, fmt.Sprintf("%d×%s", n, human(delays[i])))
		} else {
			parts = append(parts, human(delays[i]))
		}
		i = j
	}
	stc := "unset"
	if p.startToClose > 0 {
		stc = human(p.startToClose)
	}
	budget := "none"
	if p.scheduleToClose > 0 {
		budget = human(p.scheduleToClose)
	}
	waits := "none"
	if len(parts) > 0 {
		waits = strings.Join(parts, " + ") + " = " + human(total) + " (at most; jitter shortens them)"
	}
	factor := p.backoff
	if !(factor >= 1) {
		factor = activity.DefaultBackoff
	}
	fields := []string{
		"start-to-close " + stc + p.mark("start_to_close_timeout"),
		fmt.Sprintf("%d %s%s", p.maxAttempts, plural(p.maxAttempts, "attempt", "attempts"), p.mark("retry_policy.max_attempts")),
		"initial " + human(activity.Backoff(p.retryPolicy(), 1)) + p.mark("retry_policy.initial_ms"),
		"backoff ×" + strconv.FormatFloat(factor, 'g', -1, 64) + p.mark("retry_policy.backoff"),
		"max interval " + human(activity.Backoff(p.retryPolicy(), 1<<20)) + p.mark("retry_policy.max_interval_ms"),
		"schedule-to-close " + budget + p.mark("schedule_to_close_timeout"),
	}
	s := strings.Join(fields, " · ") + "; retry waits " + waits
	if unknown {
		s += "; no activity of this type was scheduled since the daemon began keeping options, so the defaults stand in for the code's"
	}
	return s
}

// checkPolicy applies the rules of thumb (client.CheckPolicy, the rule the
// console's stats view applies too) to one activity type.
func checkPolicy(s *durablev1.ActivityTypeStats, p policyFlags) []policyCheck {
	cp := client.CheckedPolicy{
		StartToClose: p.startToClose, ScheduleToClose: p.scheduleToClose,
		Retry: p.retryPolicy(), MaxAttempts: p.maxAttempts,
	}
	var out []policyCheck
	for _, f := range client.CheckPolicy(cp, s.GetP95().AsDuration(), s.GetP99().AsDuration()) {
		r := "ok"
		if !f.OK {
			r = "warn"
		}
		out = append(out, policyCheck{ActivityType: s.GetActivityType(), Check: f.Check, Result: r, Note: f.Note})
	}
	return out
}
