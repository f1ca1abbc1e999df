package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/demo/sink"
	"github.com/tinyllm/durable/workflow"
)

// The workload: SoakFlow runs a wave of steps at once, sleeps on a durable
// timer, then runs a closing step. Each kind of step is an activity type of
// its own, so that an operator's filter can pick one kind, and exercises one
// path of the engine:
//
//   - Retry fails its first attempts (some after applying the effect, so the
//     effect is delivered again) and then succeeds.
//   - Beat works in chunks, heartbeats its progress and resumes from the
//     checkpoint; its first attempt may stop heartbeating and time out.
//   - Doom fails every attempt while its downstream is "down" (its gate is
//     closed), so it dead-letters; the operator opens the gate and redrives it.
//   - Reject fails once, non-retryably; the workflow sees the failure.
//
// Every step but Reject applies one effect to the sink, keyed by its
// idempotency key.
const (
	flowName   = "SoakFlow"
	taskQueue  = "soak"
	kindRetry  = "Retry"
	kindBeat   = "Beat"
	kindDoom   = "Doom"
	kindReject = "Reject"

	// Failure types the activities report.
	failFlaky    = "Flaky"
	failDown     = "DownstreamUnavailable"
	failRejected = "Rejected"
	failBroken   = "Broken"
)

// FlowInput is SoakFlow's input.
type FlowInput struct {
	// Wave runs at once; Final runs after it and the timer.
	Wave  []Step        `json:"wave"`
	Final Step          `json:"final"`
	Sleep time.Duration `json:"sleep"`
	// FailOnReject fails the workflow after the wave if a step was rejected.
	FailOnReject bool `json:"fail_on_reject,omitempty"`
}

// Step is one activity's input.
type Step struct {
	// Index is the step's place in the workflow (the final step is last): the
	// check maps effects to steps through it.
	Index int    `json:"index"`
	Kind  string `json:"kind"`
	// Failures is how many attempts of a Retry fail before one succeeds;
	// AfterEffect makes them fail after applying the effect.
	Failures    int  `json:"failures,omitempty"`
	AfterEffect bool `json:"after_effect,omitempty"`
	// Chunks is a Beat's work; Stall makes its first attempt stop
	// heartbeating half way.
	Chunks int  `json:"chunks,omitempty"`
	Stall  bool `json:"stall,omitempty"`
}

// FlowResult is what a completed SoakFlow returns.
type FlowResult struct {
	Done     []int `json:"done"`
	Rejected []int `json:"rejected"`
}

// options is the policy of each kind of step. Timeouts are wide enough for
// a loaded machine running the race detector; backoffs short, so that a run
// retries often.
func options(kind string) workflow.ActivityOptions {
	retry := func(maxAttempts int) *workflow.RetryPolicy {
		return &workflow.RetryPolicy{
			InitialInterval: 50 * time.Millisecond, BackoffCoefficient: 2,
			MaximumInterval: 500 * time.Millisecond, MaximumAttempts: maxAttempts,
		}
	}
	switch kind {
	case kindBeat:
		return workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second, HeartbeatTimeout: 2 * time.Second, RetryPolicy: retry(6)}
	case kindDoom:
		return workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Second, RetryPolicy: retry(2)}
	case kindReject:
		return workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Second, RetryPolicy: retry(3)}
	default:
		return workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Second, RetryPolicy: retry(8)}
	}
}

// SoakFlow is the workflow every started execution runs.
func SoakFlow(ctx workflow.Context, in FlowInput) (FlowResult, error) {
	futures := make([]workflow.Future, len(in.Wave))
	for i, s := range in.Wave {
		futures[i] = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, options(s.Kind)), s.Kind, s)
	}
	var res FlowResult
	for i, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			res.Rejected = append(res.Rejected, in.Wave[i].Index)
			continue
		}
		res.Done = append(res.Done, in.Wave[i].Index)
	}
	if in.FailOnReject && len(res.Rejected) > 0 {
		return FlowResult{}, activity.NewNonRetryable(failRejected, fmt.Sprintf("%d steps rejected", len(res.Rejected)))
	}
	workflow.Sleep(ctx, in.Sleep)
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, options(in.Final.Kind)), in.Final.Kind, in.Final).Get(ctx, nil); err != nil {
		return FlowResult{}, err
	}
	res.Done = append(res.Done, in.Final.Index)
	return res, nil
}

// randomFlow draws a workflow's input.
func randomFlow(r *rand.Rand) FlowInput {
	n := 3 + r.IntN(5)
	in := FlowInput{Sleep: time.Duration(50+r.IntN(200)) * time.Millisecond, FailOnReject: r.IntN(4) == 0}
	for i := range n {
		s := Step{Index: i}
		switch p := r.IntN(100); {
		case p < 45:
			s.Kind, s.Failures, s.AfterEffect = kindRetry, r.IntN(4), r.IntN(2) == 0
		case p < 70:
			s.Kind, s.Chunks, s.Stall = kindBeat, 4+r.IntN(6), r.IntN(4) == 0
		case p < 90:
			s.Kind = kindDoom
		default:
			s.Kind = kindReject
		}
		in.Wave = append(in.Wave, s)
	}
	in.Final = Step{Index: n, Kind: kindRetry, Failures: r.IntN(2)}
	return in
}

// gates says which Doom steps may succeed: the operator opens a letter's
// gate before it redrives it, and opens all of them when the load ends.
type gates struct {
	mu   sync.Mutex
	open map[string]bool
	all  atomic.Bool
}

func newGates() *gates { return &gates{open: map[string]bool{}} }

func (g *gates) openKey(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open[key] = true
}

func (g *gates) isOpen(key string) bool {
	if g.all.Load() {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open[key]
}

// activities are the step implementations, shared by every worker.
type activities struct {
	sink  *sink.Store
	gates *gates
	// failures numbers every failure an activity reports, so that the check
	// can find each acknowledged one in the attempt trail by its message.
	failures atomic.Int64
}

// fail returns a failure whose message is unique in the run.
func (a *activities) fail(typ, key string, attempt int, why string, nonRetryable bool) error {
	msg := fmt.Sprintf("%s: attempt %d of %s %s", failureTag(a.failures.Add(1)), attempt, key, why)
	if nonRetryable {
		return activity.NewNonRetryable(typ, msg)
	}
	return activity.NewError(typ, msg)
}

// failureTag is the unique prefix of the n-th failure's message.
func failureTag(n int64) string { return "f" + strconv.FormatInt(n, 10) }

func (a *activities) apply(ctx context.Context, key string) error {
	_, err := a.sink.Apply(ctx, key)
	return err
}

// Retry fails its first s.Failures attempts, then applies its effect.
func (a *activities) Retry(ctx context.Context, s Step) error {
	key, attempt := activity.IdempotencyKey(ctx), activity.Attempt(ctx)
	if err := pause(ctx, time.Duration(5+attempt*7%40)*time.Millisecond); err != nil {
		return err
	}
	if attempt <= s.Failures && !s.AfterEffect {
		return a.fail(failFlaky, key, attempt, "failed before its effect", false)
	}
	if err := a.apply(ctx, key); err != nil {
		return err
	}
	if attempt <= s.Failures {
		return a.fail(failFlaky, key, attempt, "failed after its effect", false)
	}
	return nil
}

// Beat works through s.Chunks chunks from its checkpoint, heartbeating the
// chunks done, then applies its effect. A stalling first attempt stops
// heartbeating half way and waits for its lease to run out.
func (a *activities) Beat(ctx context.Context, s Step) error {
	key, attempt := activity.IdempotencyKey(ctx), activity.Attempt(ctx)
	done := 0
	if d := activity.HeartbeatDetails(ctx); len(d) > 0 {
		n, err := strconv.Atoi(string(d))
		if err != nil {
			return a.fail(failBroken, key, attempt, fmt.Sprintf("checkpoint %q does not parse", d), true)
		}
		done = n
	}
	for ; done < s.Chunks; done++ {
		if s.Stall && attempt == 1 && done == s.Chunks/2 {
			<-ctx.Done()
			return context.Cause(ctx)
		}
		if err := pause(ctx, 30*time.Millisecond); err != nil {
			return err
		}
		activity.RecordHeartbeat(ctx, []byte(strconv.Itoa(done+1)))
	}
	return a.apply(ctx, key)
}

// Doom fails while its gate is closed; once open it applies its effect.
func (a *activities) Doom(ctx context.Context, s Step) error {
	key, attempt := activity.IdempotencyKey(ctx), activity.Attempt(ctx)
	if !a.gates.isOpen(key) {
		return a.fail(failDown, key, attempt, "found its downstream down", false)
	}
	return a.apply(ctx, key)
}

// Reject fails for good.
func (a *activities) Reject(ctx context.Context, s Step) error {
	return a.fail(failRejected, activity.IdempotencyKey(ctx), activity.Attempt(ctx), "was rejected", true)
}

// pause is a downstream call of length d.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
