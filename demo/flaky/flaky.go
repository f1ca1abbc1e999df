// Package flaky is FlakyDemo: a workflow of N activities whose attempts fail
// at random, each applying one effect to a sink keyed by its idempotency key,
// so that a run proves every effect lands exactly once however often attempts
// fail, workers die and the daemon restarts.
package flaky

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/demo/sink"
	"github.com/tinyllm/durable/workflow"
)

// Names under which a worker registers FlakyDemo.
const (
	WorkflowName = "FlakyDemo"
	ActivityName = "FlakyStep"
)

// Failure types an attempt of FlakyStep may report.
const (
	// FailureFlaky is the random, retryable failure drawn with fail_rate.
	FailureFlaky = "Flaky"
	// FailureBadSpec is the non-retryable failure that bad_input triggers.
	FailureBadSpec = "BadSpec"
	// FailureOutage is the retryable failure of every attempt while a worker
	// runs with --outage.
	FailureOutage = "DownstreamUnavailable"
)

// Defaults applied to zero Input fields.
const (
	DefaultActivities = 20
	// DefaultMaxAttempts is high enough that fail_rate 0.5 practically never
	// dead-letters (0.5^25); set max_attempts low to reach the DLQ on purpose.
	DefaultMaxAttempts = 25
)

// Input is FlakyDemo's input. The JSON names are what `wf start FlakyDemo
// --activities 3 --max-attempts 2` produces.
type Input struct {
	// Activities is the number of activities; default 20.
	Activities int `json:"activities"`
	// FailRate is the chance in [0, 1] that an attempt fails.
	FailRate float64 `json:"fail_rate"`
	// MaxAttempts is the attempt whose failure dead-letters an activity;
	// default 25.
	MaxAttempts int `json:"max_attempts"`
	// Seed makes the failures reproducible: an attempt's fate is a function of
	// seed, idempotency key and attempt number.
	Seed int64 `json:"seed"`
	// BadInput makes the last activity fail with the non-retryable BadSpec,
	// which fails the workflow.
	BadInput bool `json:"bad_input"`
}

// Step is the input of one FlakyStep activity.
type Step struct {
	Index    int     `json:"index"`
	FailRate float64 `json:"fail_rate"`
	Seed     int64   `json:"seed"`
	Bad      bool    `json:"bad,omitempty"`
}

// StepResult is what a successful FlakyStep attempt returns.
type StepResult struct {
	// Key is the idempotency key the effect was applied under.
	Key string `json:"key"`
	// Attempt is the attempt that succeeded.
	Attempt int `json:"attempt"`
	// Deliveries is how many times the sink had seen Key, this attempt's
	// delivery included: above 1 when an earlier attempt applied the effect
	// and then failed or died.
	Deliveries int `json:"deliveries"`
}

// Result is FlakyDemo's result.
type Result struct {
	Activities int `json:"activities"`
	// Attempts sums the succeeding attempt numbers of all activities.
	Attempts int `json:"attempts"`
	// Redelivered counts the activities whose effect reached the sink more
	// than once (and was applied once).
	Redelivered int      `json:"redelivered"`
	Keys        []string `json:"keys"`
}

// FlakyDemo schedules in.Activities FlakyStep activities at once, waits for
// all of them and fails with the first non-retryable failure if any. A
// dead-lettered activity keeps it waiting until an operator redrives it.
func FlakyDemo(ctx workflow.Context, in Input) (Result, error) {
	if in.Activities == 0 {
		in.Activities = DefaultActivities
	}
	if in.MaxAttempts == 0 {
		in.MaxAttempts = DefaultMaxAttempts
	}
	if in.Activities < 0 || in.FailRate < 0 || in.FailRate > 1 || in.MaxAttempts < 0 {
		return Result{}, activity.NewNonRetryable(FailureBadSpec,
			fmt.Sprintf("want activities >= 0, fail_rate in [0, 1], max_attempts >= 0; got %+v", in))
	}
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Second,
		RetryPolicy: &workflow.RetryPolicy{
			InitialInterval:    50 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Second,
			MaximumAttempts:    in.MaxAttempts,
		},
	})
	futures := make([]workflow.Future, in.Activities)
	for i := range futures {
		futures[i] = workflow.ExecuteActivity(ctx, ActivityName, Step{
			Index: i, FailRate: in.FailRate, Seed: in.Seed,
			Bad: in.BadInput && i == in.Activities-1,
		})
	}
	res := Result{Activities: in.Activities}
	var firstErr error
	for _, f := range futures {
		var r StepResult
		if err := f.Get(ctx, &r); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		res.Attempts += r.Attempt
		if r.Deliveries > 1 {
			res.Redelivered++
		}
		res.Keys = append(res.Keys, r.Key)
	}
	if firstErr != nil {
		return Result{}, firstErr
	}
	return res, nil
}

// Activities holds FlakyStep's dependencies; register its method on a
// worker with RegisterActivityWithName(a.FlakyStep, ActivityName).
type Activities struct {
	// Sink receives the effects.
	Sink sink.Sink
	// Outage makes every attempt fail with the retryable
	// DownstreamUnavailable, before touching the sink.
	Outage bool
}

// FlakyStep applies one effect keyed by its idempotency key. It takes a
// short, drawn time (a downstream call), then fails with probability
// FailRate, half the time before applying the effect and half the time after,
// so that retries also redeliver effects that were already applied.
func (a *Activities) FlakyStep(ctx context.Context, s Step) (StepResult, error) {
	key := activity.IdempotencyKey(ctx)
	attempt := activity.Attempt(ctx)
	if a.Outage {
		return StepResult{}, activity.NewError(FailureOutage, "downstream is unavailable (worker runs with --outage)")
	}
	if s.Bad {
		return StepResult{}, activity.NewNonRetryable(FailureBadSpec, fmt.Sprintf("step %d: the spec cannot be processed (bad_input)", s.Index))
	}
	d := Draw(s.Seed, key, attempt)
	if err := sleep(ctx, d.Work); err != nil {
		return StepResult{}, err
	}
	fail := d.Fail < s.FailRate
	if fail && !d.AfterEffect {
		return StepResult{}, activity.NewError(FailureFlaky, fmt.Sprintf("attempt %d failed before applying %s", attempt, key))
	}
	del, err := a.Sink.Apply(ctx, key)
	if err != nil {
		return StepResult{}, err
	}
	if fail {
		return StepResult{}, activity.NewError(FailureFlaky, fmt.Sprintf("attempt %d failed after applying %s", attempt, key))
	}
	return StepResult{Key: key, Attempt: attempt, Deliveries: del.Count}, nil
}

// Fate is what an attempt's draw decides.
type Fate struct {
	// Fail is uniform in [0, 1); the attempt fails when it is below the
	// fail rate.
	Fail float64
	// AfterEffect says a failing attempt fails after applying its effect.
	AfterEffect bool
	// Work is how long the attempt's downstream call takes.
	Work time.Duration
}

// Draw returns the fate of attempt of key under seed; the same three inputs
// always give the same fate, on any worker.
func Draw(seed int64, key string, attempt int) Fate {
	h := fnv.New64a()
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(attempt)))
	r := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	return Fate{
		Fail:        r.Float64(),
		AfterEffect: r.IntN(2) == 1,
		Work:        time.Duration(20+r.IntN(80)) * time.Millisecond,
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
