package activity_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestBackoffHandExample checks the worked example of the specification
// (b0 = 1 s, r = 2, bmax = 10 s), the defaults, a non-integer factor and
// full jitter at u = 0.5.
func TestBackoffHandExample(t *testing.T) {
	t.Parallel()
	p := &durablev1.RetryPolicy{InitialMs: 1000, Backoff: 2, MaxIntervalMs: 10_000, MaxAttempts: 4}
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		n := i + 1
		if got := activity.Backoff(p, n); got != w {
			t.Errorf("Backoff(n=%d) = %v, want %v", n, got, w)
		}
		if got := activity.Jitter(activity.Backoff(p, n), 0.5); got != w/2 {
			t.Errorf("Jitter(Backoff(n=%d), 0.5) = %v, want %v", n, got, w/2)
		}
	}

	defaults := []struct {
		name   string
		policy *durablev1.RetryPolicy
		n      int
		want   time.Duration
	}{
		{"NilPolicyFirst", nil, 1, time.Second},
		{"NilPolicyThird", nil, 3, 4 * time.Second},
		{"EmptyPolicyCapped", &durablev1.RetryPolicy{}, 20, time.Minute},
		{"FactorBelowOneIsUnset", &durablev1.RetryPolicy{InitialMs: 100, Backoff: 0.5}, 3, 400 * time.Millisecond},
		{"NaNFactorIsUnset", &durablev1.RetryPolicy{InitialMs: 100, Backoff: math.NaN()}, 2, 200 * time.Millisecond},
		{"NegativeFactorIsUnset", &durablev1.RetryPolicy{InitialMs: 100, Backoff: -3}, 3, 400 * time.Millisecond},
		{"MinusInfFactorIsUnset", &durablev1.RetryPolicy{InitialMs: 100, Backoff: math.Inf(-1)}, 3, 400 * time.Millisecond},
		{"PlusInfFactorIsUnset", &durablev1.RetryPolicy{InitialMs: 100, Backoff: math.Inf(1)}, 3, 400 * time.Millisecond},
		{"NonIntegerFactor", &durablev1.RetryPolicy{InitialMs: 1000, Backoff: 1.5}, 3, 2250 * time.Millisecond},
		{"FactorOneIsConstant", &durablev1.RetryPolicy{InitialMs: 300, Backoff: 1}, 7, 300 * time.Millisecond},
		{"HugeAttemptStaysCapped", &durablev1.RetryPolicy{InitialMs: 1, Backoff: 10, MaxIntervalMs: 5000}, 10_000, 5 * time.Second},
		{"ZeroAttemptCountsAsFirst", nil, 0, time.Second},
	}
	for _, tc := range defaults {
		t.Run(tc.name, func(t *testing.T) {
			if got := activity.Backoff(tc.policy, tc.n); got != tc.want {
				t.Errorf("Backoff = %v, want %v", got, tc.want)
			}
		})
	}
	if activity.DefaultInitial != time.Second || activity.DefaultBackoff != 2.0 || activity.DefaultInterval != time.Minute {
		t.Errorf("defaults = %v, %v, %v", activity.DefaultInitial, activity.DefaultBackoff, activity.DefaultInterval)
	}
}

// TestJitterBoundsAndMean draws 20,000 full-jitter delays: every one lies in
// [0, d) and their mean is d/2 within four standard errors (the sd of U*d is
// d/sqrt(12)).
func TestJitterBoundsAndMean(t *testing.T) {
	t.Parallel()
	const draws = 20_000
	d := 8 * time.Second
	rng := rand.New(rand.NewPCG(1, 2))
	var sum float64
	for range draws {
		j := activity.Jitter(d, rng.Float64())
		if j < 0 || j >= d {
			t.Fatalf("Jitter = %v, outside [0, %v)", j, d)
		}
		sum += float64(j)
	}
	mean := sum / draws
	se := float64(d) / math.Sqrt(12) / math.Sqrt(draws)
	if diff := math.Abs(mean - float64(d)/2); diff > 4*se {
		t.Errorf("mean = %v, want %v ± %v", time.Duration(mean), d/2, time.Duration(4*se))
	}
	for _, u := range []float64{0, math.Nextafter(1, 0), 1, 2, -1, math.NaN()} {
		if j := activity.Jitter(d, u); j < 0 || j >= d {
			t.Errorf("Jitter(d, %v) = %v, outside [0, d)", u, j)
		}
	}
	if j := activity.Jitter(0, 0.5); j != 0 {
		t.Errorf("Jitter(0, 0.5) = %v, want 0", j)
	}
}
