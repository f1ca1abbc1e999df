package activity

import (
	"slices"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// ApplyPatch returns a copy of opts with the fields p sets replaced, and the
// paths of the fields it set ("retry_policy.max_attempts",
// "start_to_close_timeout", ...), in a fixed order. A nil patch changes
// nothing. It is the one meaning of an OptionsPatch: the engine applies
// policy overrides and edit-then-redrive through it, and the console shows
// what an override will change with it.
func ApplyPatch(opts *durablev1.ActivityOptions, p *durablev1.OptionsPatch) (*durablev1.ActivityOptions, []string) {
	out := proto.Clone(orEmptyOptions(opts)).(*durablev1.ActivityOptions)
	if p == nil {
		return out, nil
	}
	var set []string
	policy := func() *durablev1.RetryPolicy {
		if out.RetryPolicy == nil {
			out.RetryPolicy = &durablev1.RetryPolicy{}
		}
		return out.RetryPolicy
	}
	if p.InitialMs != nil {
		policy().InitialMs = p.GetInitialMs()
		set = append(set, "retry_policy.initial_ms")
	}
	if p.Backoff != nil {
		policy().Backoff = p.GetBackoff()
		set = append(set, "retry_policy.backoff")
	}
	if p.MaxIntervalMs != nil {
		policy().MaxIntervalMs = p.GetMaxIntervalMs()
		set = append(set, "retry_policy.max_interval_ms")
	}
	if p.MaxAttempts != nil {
		policy().MaxAttempts = p.GetMaxAttempts()
		set = append(set, "retry_policy.max_attempts")
	}
	if p.NonRetryable != nil {
		policy().NonRetryable = slices.Clone(p.GetNonRetryable().GetValues())
		set = append(set, "retry_policy.non_retryable")
	}
	if p.StartToCloseTimeout != nil {
		out.StartToCloseTimeout = proto.CloneOf(p.GetStartToCloseTimeout())
		set = append(set, "start_to_close_timeout")
	}
	if p.HeartbeatTimeout != nil {
		out.HeartbeatTimeout = proto.CloneOf(p.GetHeartbeatTimeout())
		set = append(set, "heartbeat_timeout")
	}
	if p.ScheduleToCloseTimeout != nil {
		out.ScheduleToCloseTimeout = proto.CloneOf(p.GetScheduleToCloseTimeout())
		set = append(set, "schedule_to_close_timeout")
	}
	return out, set
}

func orEmptyOptions(o *durablev1.ActivityOptions) *durablev1.ActivityOptions {
	if o == nil {
		return &durablev1.ActivityOptions{}
	}
	return o
}

// OptionsInForce are the options an activity's next decision uses: the
// daemon's options_in_force (its code's options with any policy override
// applied) when it reports them, else the code's own options (an older
// daemon). wf and the console read the policy, the timeouts and the retry
// schedule from it.
func OptionsInForce(a *durablev1.PendingActivity) *durablev1.ActivityOptions {
	if in := a.GetOptionsInForce(); in != nil {
		return in
	}
	return a.GetOptions()
}
