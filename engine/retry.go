package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Outcome is what the retry rule decides for a failed attempt.
type Outcome int

const (
	// OutcomeFail ends the activity: ActivityTaskFailed, the workflow wakes.
	OutcomeFail Outcome = iota + 1
	// OutcomeDeadLetter parks the activity in the DLQ; the workflow waits.
	OutcomeDeadLetter
	// OutcomeRetry makes the next attempt due after a jittered backoff.
	OutcomeRetry
)

// Decision is the result of Decide.
type Decision struct {
	Outcome Outcome
	// Next is when the next attempt is due (OutcomeRetry).
	Next time.Time
	// Failure is what history and describe record: the attempt's own failure,
	// or a ScheduleToCloseTimeout when the retry would overrun the budget.
	Failure *durablev1.Failure
}

// Decide is the retry rule, a pure function of the activity (its options in
// force, see InForce), the failure of its current attempt, the time and the
// jitter step:
//   - a non-retryable failure (flag, or type listed in the policy) fails the
//     activity;
//   - the attempt reaching max_attempts dead-letters it;
//   - a retry that would start at or after the schedule-to-close expiry
//     dead-letters it with a ScheduleToCloseTimeout;
//   - otherwise the next attempt is due after jitter(Backoff(policy, attempt)).
func Decide(in *durablev1.PendingActivity, f *durablev1.Failure, now time.Time, jitter func(time.Duration) time.Duration) Decision {
	policy := optionsInForce(in).GetRetryPolicy()
	if f.GetNonRetryable() || slices.Contains(policy.GetNonRetryable(), f.GetType()) {
		return Decision{Outcome: OutcomeFail, Failure: f}
	}
	if in.GetAttempt() >= in.GetMaxAttempts() {
		return Decision{Outcome: OutcomeDeadLetter, Failure: f}
	}
	next := now.Add(jitter(activity.Backoff(policy, int(in.GetAttempt()))))
	if exp := in.GetExpirationTime(); exp != nil && !next.Before(exp.AsTime()) {
		return Decision{Outcome: OutcomeDeadLetter, Failure: systemFailure(TimeoutScheduleToClose,
			"the retry due at %s would start after the schedule-to-close budget ends at %s; last failure: %s: %s",
			next.UTC().Format(time.RFC3339Nano), exp.AsTime().UTC().Format(time.RFC3339Nano), f.GetType(), f.GetMessage())}
	}
	return Decision{Outcome: OutcomeRetry, Next: next, Failure: f}
}

// Failure types the engine itself reports, under the names the engine's
// callers (metrics, tests) know them by. They are the activity package's
// constants, where every failure type the system reports is documented.
const (
	TimeoutStartToClose    = activity.TypeStartToCloseTimeout
	TimeoutHeartbeat       = activity.TypeHeartbeatTimeout
	TimeoutScheduleToStart = activity.TypeScheduleToStartTimeout
	TimeoutScheduleToClose = activity.TypeScheduleToCloseTimeout
	// WorkflowTaskTimeout fails a workflow task whose lease ran out.
	WorkflowTaskTimeout = activity.TypeWorkflowTaskTimeout
)

// systemFailure is a retryable failure the engine reports itself, built by
// the same converter that turns the SDK's errors into Failures.
func systemFailure(typ, format string, args ...any) *durablev1.Failure {
	return activity.FailureFromError(activity.NewError(typ, fmt.Sprintf(format, args...)))
}

// LeaseDeadline is when a lease ends: the start-to-close deadline or, for a
// heartbeating activity, heartbeat_timeout after the last heartbeat (or the
// start), whichever is first, and never after the schedule-to-close expiry.
// It also returns the failure type of a lease that ends then. The timeouts
// are the options in force (see InForce).
func LeaseDeadline(in *durablev1.PendingActivity) (time.Time, string) {
	opts := optionsInForce(in)
	started := in.GetLastStartedTime().AsTime()
	deadline := started.Add(opts.GetStartToCloseTimeout().AsDuration())
	why := TimeoutStartToClose
	if hb := opts.GetHeartbeatTimeout().AsDuration(); hb > 0 {
		last := started
		if t := in.GetLastHeartbeatTime(); t != nil && t.AsTime().After(started) {
			last = t.AsTime()
		}
		if d := last.Add(hb); d.Before(deadline) {
			deadline, why = d, TimeoutHeartbeat
		}
	}
	if exp := in.GetExpirationTime(); exp != nil && exp.AsTime().Before(deadline) {
		deadline, why = exp.AsTime(), TimeoutScheduleToClose
	}
	return deadline, why
}

func (e *Engine) jitter(d time.Duration) time.Duration {
	if e.opts.Jitter != nil {
		return e.opts.Jitter(d)
	}
	return activity.Jitter(d, e.rng.Float64())
}
