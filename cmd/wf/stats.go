package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const statsUsage = `
Usage: wf stats [--type T] [--check-policy [policy flags]]

Prints attempt latency per activity type (P50, P95, P99, max) with the
timeouts they suggest: start-to-close ≈ 2 × P99, initial backoff ≈ P95.

With --check-policy (implied by any policy flag), wf checks a retry policy
against those numbers and exits 1 if a check warns:
  - start-to-close below P99 times out over 1% of healthy attempts; below
    2 × P99 leaves no headroom;
  - an initial backoff under half of P95 retries before a slow downstream
    has recovered;
  - a max interval above start-to-close lets retry waits grow past the
    attempts they separate;
  - a schedule-to-close budget shorter than every attempt plus every wait
    dead-letters before max attempts are used.
Unset policy flags take the daemon's defaults (1s, ×2, 60s, 5 attempts).

Examples:
  wf stats
  wf stats --type ChargeCard --check-policy --start-to-close 2s --initial 500ms
  wf stats --json | jq '.stats[] | {activityType, p99}'
`

// statsDoc is stats's --json document.
type statsDoc struct {
	Stats  []json.RawMessage `json:"stats"`
	Checks []policyCheck     `json:"checks,omitempty"`
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
}

func (c *cli) stats(args []string) int {
	fs := c.flagSet("stats", statsUsage)
	typ := fs.String("type", "", "only this activity type")
	check := fs.Bool("check-policy", false, "check a retry policy (the policy flags) against the observed latency")
	var p policyFlags
	fs.DurationVar(&p.startToClose, "start-to-close", 0, "policy: how long one attempt may run")
	fs.DurationVar(&p.scheduleToClose, "schedule-to-close", 0, "policy: budget for all attempts and waits")
	fs.DurationVar(&p.initial, "initial", 0, "policy: backoff after the first failure (default 1s)")
	fs.Float64Var(&p.backoff, "backoff", 0, "policy: growth factor of the backoff (default 2)")
	fs.DurationVar(&p.maxInterval, "max-interval", 0, "policy: cap on one backoff (default 60s)")
	fs.IntVar(&p.maxAttempts, "max-attempts", 0, "policy: attempts before dead-lettering (default 5)")
	pos, code := c.parse(fs, "stats", args)
	if code >= 0 {
		return code
	}
	if len(pos) != 0 {
		return c.usageError("stats", fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "start-to-close", "schedule-to-close", "initial", "backoff", "max-interval", "max-attempts":
			*check = true
		}
	})
	if p.maxAttempts <= 0 {
		p.maxAttempts = 5
	}

	ctx, cl, done, code := c.connect(false)
	if code >= 0 {
		return code
	}
	defer done()
	all, err := cl.Stats(ctx)
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
	if *check {
		for _, s := range stats {
			checks = append(checks, checkPolicy(s, p)...)
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
		doc := statsDoc{Stats: []json.RawMessage{}, Checks: checks}
		for _, s := range stats {
			doc.Stats = append(doc.Stats, rawProto(s))
		}
		if err := printJSON(c.stdout, doc); err != nil {
			return c.done(err)
		}
		return result
	}
	if len(stats) == 0 {
		fmt.Fprintln(c.stdout, "No activity attempts recorded yet.")
		return exitOK
	}
	t := table(c.stdout)
	row(t, "TYPE", "ATTEMPTS", "FAILURES", "P50", "P95", "P99", "MAX", "SUGGESTED START-TO-CLOSE", "SUGGESTED INITIAL")
	for _, s := range stats {
		row(t, s.GetActivityType(), strconv.FormatInt(s.GetAttempts(), 10), strconv.FormatInt(s.GetFailures(), 10),
			dur(s.GetP50()), dur(s.GetP95()), dur(s.GetP99()), dur(s.GetMax()),
			human(2*s.GetP99().AsDuration()), human(s.GetP95().AsDuration()))
	}
	t.Flush()
	if !*check {
		return exitOK
	}
	fmt.Fprintf(c.stdout, "\nPolicy: %s\n", p.describe())
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

// describe summarises the policy and its retry waits before jitter.
func (p policyFlags) describe() string {
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
	s2c := "unset"
	if p.startToClose > 0 {
		s2c = human(p.startToClose)
	}
	waits := "none"
	if len(parts) > 0 {
		waits = strings.Join(parts, " + ") + " = " + human(total) + " (at most; jitter shortens them)"
	}
	return fmt.Sprintf("start-to-close %s, %d attempts, retry waits %s", s2c, p.maxAttempts, waits)
}

// checkPolicy applies the rules of thumb to one activity type.
func checkPolicy(s *durablev1.ActivityTypeStats, p policyFlags) []policyCheck {
	typ := s.GetActivityType()
	p95, p99 := s.GetP95().AsDuration(), s.GetP99().AsDuration()
	var out []policyCheck
	add := func(check string, ok bool, note string) {
		r := "ok"
		if !ok {
			r = "warn"
		}
		out = append(out, policyCheck{ActivityType: typ, Check: check, Result: r, Note: note})
	}
	if p.startToClose > 0 {
		switch {
		case p.startToClose < p99:
			add("start-to-close", false, fmt.Sprintf("%s is below P99 %s: over 1%% of attempts will time out; use about %s",
				human(p.startToClose), human(p99), human(2*p99)))
		case p.startToClose < 2*p99:
			add("start-to-close", false, fmt.Sprintf("%s is below 2×P99 (%s): little headroom for a slow day",
				human(p.startToClose), human(2*p99)))
		default:
			add("start-to-close", true, fmt.Sprintf("%s ≥ 2×P99 (%s)", human(p.startToClose), human(2*p99)))
		}
	}
	initial := activity.Backoff(p.retryPolicy(), 1)
	if initial < p95/2 {
		add("initial", false, fmt.Sprintf("%s is under half of P95 %s: retries arrive before a slow downstream recovers",
			human(initial), human(p95)))
	} else {
		add("initial", true, fmt.Sprintf("%s vs P95 %s", human(initial), human(p95)))
	}
	maxInterval := activity.Backoff(p.retryPolicy(), 1<<20)
	if p.startToClose > 0 {
		add("max-interval", maxInterval <= p.startToClose, fmt.Sprintf("max interval %s, start-to-close %s",
			human(maxInterval), human(p.startToClose)))
	}
	if p.scheduleToClose > 0 {
		attempt := p.startToClose
		if attempt <= 0 {
			attempt = p99
		}
		need := time.Duration(p.maxAttempts) * attempt
		for _, d := range activity.RetryDelays(p.retryPolicy(), p.maxAttempts) {
			need += d
		}
		add("schedule-to-close", p.scheduleToClose >= need, fmt.Sprintf("budget %s, worst case of %d attempts with waits %s",
			human(p.scheduleToClose), p.maxAttempts, human(need)))
	}
	return out
}
