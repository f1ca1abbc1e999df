package activity

import (
	"math"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The defaults that a zero RetryPolicy field stands for, so that an empty
// policy backs off instead of retrying in a hot loop.
const (
	DefaultInitial  = time.Second
	DefaultBackoff  = 2.0
	DefaultInterval = time.Minute
)

// Backoff returns d_n, the wait before attempt n+1 after attempt n (n >= 1)
// failed: min(initial * backoff^(n-1), max_interval). Zero fields take their
// defaults and a factor below 1, negative ones included, counts as unset (as
// do NaN and infinities, which the daemon refuses before they get here). A nil policy is all defaults;
// n below 1 is treated as 1.
func Backoff(p *durablev1.RetryPolicy, n int) time.Duration {
	initial := time.Duration(p.GetInitialMs()) * time.Millisecond
	if initial <= 0 {
		initial = DefaultInitial
	}
	factor := p.GetBackoff()
	if !(factor >= 1) || math.IsInf(factor, 0) { // also catches NaN
		factor = DefaultBackoff
	}
	maxInterval := time.Duration(p.GetMaxIntervalMs()) * time.Millisecond
	if maxInterval <= 0 {
		maxInterval = DefaultInterval
	}
	if n < 1 {
		n = 1
	}
	d := float64(initial) * math.Pow(factor, float64(n-1))
	if d >= float64(maxInterval) || math.IsInf(d, 0) || math.IsNaN(d) {
		return maxInterval
	}
	return time.Duration(d)
}

// Jitter applies full jitter: it returns u*d for u in [0, 1). A u outside
// that range is clamped into it, so the delay is always in [0, d) for d > 0.
func Jitter(d time.Duration, u float64) time.Duration {
	if d <= 0 || !(u > 0) {
		return 0
	}
	if u >= 1 {
		u = math.Nextafter(1, 0)
	}
	j := time.Duration(u * float64(d))
	if j >= d {
		j = d - 1
	}
	return j
}

// RetryDelays lists the waits a policy would use between maxAttempts attempts
// (maxAttempts-1 of them), before jitter. Operators use it to check a policy
// against a schedule-to-close budget.
func RetryDelays(p *durablev1.RetryPolicy, maxAttempts int) []time.Duration {
	var out []time.Duration
	for n := 1; n < maxAttempts; n++ {
		out = append(out, Backoff(p, n))
	}
	return out
}
