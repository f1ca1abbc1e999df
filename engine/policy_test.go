package engine_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

var defaults = engine.PolicyDefaults{MaxAttempts: 5, StartToClose: 10 * time.Minute}

func i32(n int32) *int32 { return &n }
func i64(n int64) *int64 { return &n }

func at(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }

// running is an activity as its code scheduled it: max 2 attempts,
// start-to-close 1 min, scheduled at t0, attempt 1 started at t0+10s.
func running() *durablev1.PendingActivity {
	return &durablev1.PendingActivity{
		ActivityType: "Charge", TaskQueue: "q", State: durablev1.ActivityState_ACTIVITY_STATE_STARTED,
		Attempt: 1, MaxAttempts: 2, ScheduledTime: at(0), LastStartedTime: at(10 * time.Second),
		LeaseDeadline: at(70 * time.Second),
		Options: &durablev1.ActivityOptions{
			TaskQueue: "q", StartToCloseTimeout: dur(time.Minute),
			RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000, MaxAttempts: 2, NonRetryable: []string{"Declined"}},
		},
	}
}

func override(p *durablev1.OptionsPatch) *durablev1.PolicyOverride {
	return &durablev1.PolicyOverride{ActivityType: "Charge", Patch: p}
}

// TestInForce is the rule that says which options an activity's next
// decision uses: the code's, with the override's fields replacing theirs.
func TestInForce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       func() *durablev1.PendingActivity
		o        *durablev1.PolicyOverride
		fields   []string
		attempts int32
		stc      time.Duration
		lease    time.Duration // lease deadline after t0; 0: none
		expires  time.Duration // expiration after t0; 0: none
	}{
		{name: "NoOverrideIsTheCode", in: running, attempts: 2, stc: time.Minute, lease: 70 * time.Second},
		{name: "MaxAttempts", in: running, o: override(&durablev1.OptionsPatch{MaxAttempts: i32(6)}),
			fields: []string{"retry_policy.max_attempts"}, attempts: 6, stc: time.Minute, lease: 70 * time.Second},
		{name: "MaxAttemptsZeroIsTheDaemonDefault", in: running, o: override(&durablev1.OptionsPatch{MaxAttempts: i32(0)}),
			fields: []string{"retry_policy.max_attempts"}, attempts: 5, stc: time.Minute, lease: 70 * time.Second},
		{name: "ShorterStartToCloseMovesTheLease", in: running, o: override(&durablev1.OptionsPatch{StartToCloseTimeout: dur(20 * time.Second)}),
			fields: []string{"start_to_close_timeout"}, attempts: 2, stc: 20 * time.Second, lease: 30 * time.Second},
		{name: "LongerStartToCloseMovesTheLease", in: running, o: override(&durablev1.OptionsPatch{StartToCloseTimeout: dur(time.Hour)}),
			fields: []string{"start_to_close_timeout"}, attempts: 2, stc: time.Hour, lease: time.Hour + 10*time.Second},
		{name: "ZeroStartToCloseIsTheDefault", in: running, o: override(&durablev1.OptionsPatch{StartToCloseTimeout: dur(0)}),
			fields: []string{"start_to_close_timeout"}, attempts: 2, stc: 10 * time.Minute, lease: 10*time.Minute + 10*time.Second},
		{name: "HeartbeatTimeoutFromTheLastHeartbeat", in: func() *durablev1.PendingActivity {
			a := running()
			a.LastHeartbeatTime = at(40 * time.Second)
			return a
		}, o: override(&durablev1.OptionsPatch{HeartbeatTimeout: dur(5 * time.Second)}),
			fields: []string{"heartbeat_timeout"}, attempts: 2, stc: time.Minute, lease: 45 * time.Second},
		{name: "ScheduleToCloseFromTheScheduledTime", in: running, o: override(&durablev1.OptionsPatch{ScheduleToCloseTimeout: dur(30 * time.Second)}),
			fields: []string{"schedule_to_close_timeout"}, attempts: 2, stc: time.Minute, lease: 30 * time.Second, expires: 30 * time.Second},
		{name: "ZeroScheduleToCloseRemovesTheBudget", in: func() *durablev1.PendingActivity {
			a := running()
			a.Options.ScheduleToCloseTimeout = dur(40 * time.Second)
			a.ExpirationTime = at(40 * time.Second)
			return a
		}, o: override(&durablev1.OptionsPatch{ScheduleToCloseTimeout: dur(0)}),
			fields: []string{"schedule_to_close_timeout"}, attempts: 2, stc: time.Minute, lease: 70 * time.Second},
		{name: "CodeBudgetKeptWithoutAnOverrideOfIt", in: func() *durablev1.PendingActivity {
			a := running()
			a.Options.ScheduleToCloseTimeout = dur(40 * time.Second)
			a.ExpirationTime = at(40 * time.Second)
			return a
		}, o: override(&durablev1.OptionsPatch{MaxAttempts: i32(3)}),
			fields: []string{"retry_policy.max_attempts"}, attempts: 3, stc: time.Minute, lease: 40 * time.Second, expires: 40 * time.Second},
		{name: "NotRunningHasNoLease", in: func() *durablev1.PendingActivity {
			a := running()
			a.State, a.LeaseDeadline = durablev1.ActivityState_ACTIVITY_STATE_RETRYING, nil
			return a
		}, o: override(&durablev1.OptionsPatch{StartToCloseTimeout: dur(time.Second)}),
			fields: []string{"start_to_close_timeout"}, attempts: 2, stc: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := tt.in()
			code := proto.Clone(in.GetOptions())
			engine.InForce(in, tt.o, defaults)
			if !proto.Equal(in.GetOptions(), code) {
				t.Errorf("the code's options changed: %v, was %v", in.GetOptions(), code)
			}
			if !slices.Equal(in.GetOverriddenFields(), tt.fields) {
				t.Errorf("overridden fields = %q, want %q", in.GetOverriddenFields(), tt.fields)
			}
			if in.GetMaxAttempts() != tt.attempts || in.GetOptionsInForce().GetRetryPolicy().GetMaxAttempts() != tt.attempts {
				t.Errorf("max attempts = %d (in options %d), want %d", in.GetMaxAttempts(), in.GetOptionsInForce().GetRetryPolicy().GetMaxAttempts(), tt.attempts)
			}
			if got := in.GetOptionsInForce().GetStartToCloseTimeout().AsDuration(); got != tt.stc {
				t.Errorf("start-to-close in force = %v, want %v", got, tt.stc)
			}
			checkTime(t, "lease deadline", in.GetLeaseDeadline(), tt.lease)
			checkTime(t, "expiration", in.GetExpirationTime(), tt.expires)
		})
	}
}

func checkTime(t *testing.T, what string, got *timestamppb.Timestamp, after time.Duration) {
	t.Helper()
	switch {
	case after == 0 && got != nil:
		t.Errorf("%s = %v, want none", what, got.AsTime())
	case after != 0 && (got == nil || !got.AsTime().Equal(t0.Add(after))):
		t.Errorf("%s = %v, want t0+%v", what, got, after)
	}
}

// TestDecideUnderAnOverride: the retry rule reads the options in force.
func TestDecideUnderAnOverride(t *testing.T) {
	t.Parallel()
	identity := func(d time.Duration) time.Duration { return d }
	now := t0.Add(time.Minute)
	flaky := &durablev1.Failure{Type: "Flaky"}
	tests := []struct {
		name    string
		attempt int32
		p       *durablev1.OptionsPatch
		f       *durablev1.Failure
		want    engine.Outcome
		next    time.Duration // after now, for a retry
	}{
		{"CodeRetriesAttempt1", 1, nil, flaky, engine.OutcomeRetry, time.Second},
		{"CodeDeadLettersAtAttempt2", 2, nil, flaky, engine.OutcomeDeadLetter, 0},
		{"MoreAttempts", 2, &durablev1.OptionsPatch{MaxAttempts: i32(6)}, flaky, engine.OutcomeRetry, 2 * time.Second},
		{"FewerAttempts", 1, &durablev1.OptionsPatch{MaxAttempts: i32(1)}, flaky, engine.OutcomeDeadLetter, 0},
		{"LongerInitial", 1, &durablev1.OptionsPatch{InitialMs: i64(30_000)}, flaky, engine.OutcomeRetry, 30 * time.Second},
		{"NonRetryableReplaced", 1, &durablev1.OptionsPatch{NonRetryable: &durablev1.StringList{Values: []string{"Flaky"}}}, flaky, engine.OutcomeFail, 0},
		{"NonRetryableCleared", 1, &durablev1.OptionsPatch{NonRetryable: &durablev1.StringList{}}, &durablev1.Failure{Type: "Declined"}, engine.OutcomeRetry, time.Second},
		{"CodeNonRetryable", 1, nil, &durablev1.Failure{Type: "Declined"}, engine.OutcomeFail, 0},
		{"BudgetShortened", 1, &durablev1.OptionsPatch{ScheduleToCloseTimeout: dur(time.Minute)}, flaky, engine.OutcomeDeadLetter, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := running()
			in.Attempt = tt.attempt
			if tt.p != nil {
				engine.InForce(in, override(tt.p), defaults)
			}
			d := engine.Decide(in, tt.f, now, identity)
			if d.Outcome != tt.want {
				t.Fatalf("outcome = %v, want %v", d.Outcome, tt.want)
			}
			if tt.want == engine.OutcomeRetry && !d.Next.Equal(now.Add(tt.next)) {
				t.Errorf("next attempt at now+%v, want now+%v", d.Next.Sub(now), tt.next)
			}
		})
	}
}
