package client

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// CheckedPolicy is the policy of one activity type as the policy check reads
// it; a zero duration is unset.
type CheckedPolicy struct {
	StartToClose, ScheduleToClose time.Duration
	// Retry is the retry policy; MaxAttempts is the attempts it allows (5
	// when the policy leaves it unset).
	Retry       *durablev1.RetryPolicy
	MaxAttempts int
}

// PolicyOfOptions reads opts (an options in force, possibly nil) as the
// policy check does.
func PolicyOfOptions(opts *durablev1.ActivityOptions) CheckedPolicy {
	rp := opts.GetRetryPolicy()
	p := CheckedPolicy{
		StartToClose:    opts.GetStartToCloseTimeout().AsDuration(),
		ScheduleToClose: opts.GetScheduleToCloseTimeout().AsDuration(),
		MaxAttempts:     int(rp.GetMaxAttempts()),
	}
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 5
	}
	p.Retry = &durablev1.RetryPolicy{
		InitialMs:     rp.GetInitialMs(),
		Backoff:       rp.GetBackoff(),
		MaxIntervalMs: rp.GetMaxIntervalMs(),
		MaxAttempts:   int32(p.MaxAttempts),
	}
	return p
}

// PolicyFinding is one result of the policy check.
type PolicyFinding struct {
	// Check is "start-to-close", "initial", "max-interval" or
	// "schedule-to-close".
	Check string
	OK    bool
	Note  string
}

// CheckPolicy applies the rules of thumb for timeouts and retries to a policy
// and an activity type's observed attempt latency: start-to-close about
// 2×P99, an initial backoff of at least half of P95, a max interval no
// longer than start-to-close, and a schedule-to-close budget that holds every
// attempt and every wait. It is the one rule wf stats --check-policy and the
// console's stats view apply.
func CheckPolicy(p CheckedPolicy, p95, p99 time.Duration) []PolicyFinding {
	var out []PolicyFinding
	add := func(check string, ok bool, note string) {
		out = append(out, PolicyFinding{Check: check, OK: ok, Note: note})
	}
	if p.StartToClose > 0 {
		switch {
		case p.StartToClose < p99:
			add("start-to-close", false, fmt.Sprintf("%s is below P99 %s: over 1%% of attempts will time out; use about %s",
				HumanDuration(p.StartToClose), HumanDuration(p99), HumanDuration(2*p99)))
		case p.StartToClose < 2*p99:
			add("start-to-close", false, fmt.Sprintf("%s is below 2×P99 (%s): little headroom for a slow day",
				HumanDuration(p.StartToClose), HumanDuration(2*p99)))
		default:
			add("start-to-close", true, fmt.Sprintf("%s ≥ 2×P99 (%s)", HumanDuration(p.StartToClose), HumanDuration(2*p99)))
		}
	}
	initial := activity.Backoff(p.Retry, 1)
	if initial < p95/2 {
		add("initial", false, fmt.Sprintf("%s is under half of P95 %s: retries arrive before a slow downstream recovers",
			HumanDuration(initial), HumanDuration(p95)))
	} else {
		add("initial", true, fmt.Sprintf("%s vs P95 %s", HumanDuration(initial), HumanDuration(p95)))
	}
	maxInterval := activity.Backoff(p.Retry, 1<<20)
	if p.StartToClose > 0 {
		add("max-interval", maxInterval <= p.StartToClose, fmt.Sprintf("max interval %s, start-to-close %s",
			HumanDuration(maxInterval), HumanDuration(p.StartToClose)))
	}
	if p.ScheduleToClose > 0 {
		attempt := p.StartToClose
		if attempt <= 0 {
			attempt = p99
		}
		need := time.Duration(p.MaxAttempts) * attempt
		for _, d := range activity.RetryDelays(p.Retry, p.MaxAttempts) {
			need += d
		}
		add("schedule-to-close", p.ScheduleToClose >= need, fmt.Sprintf("budget %s, worst case of %d attempts with waits %s",
			HumanDuration(p.ScheduleToClose), p.MaxAttempts, HumanDuration(need)))
	}
	return out
}

// HumanDuration formats d for people at the precision that matters: 850ms,
// 3.2s, 42s, 4m05s, 3h20m, 2d4h. A negative d is formatted as its size.
func HumanDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return strings.TrimSuffix(strconv.FormatFloat(d.Seconds(), 'f', 1, 64), ".0") + "s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}
