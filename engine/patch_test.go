package engine_test

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestApplyPatch(t *testing.T) {
	t.Parallel()
	code := &durablev1.ActivityOptions{
		TaskQueue:           "q",
		StartToCloseTimeout: dur(time.Minute),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 1000, Backoff: 2, MaxIntervalMs: 60000, MaxAttempts: 2, NonRetryable: []string{"BadInput"}},
	}
	before := proto.Clone(code)
	tests := []struct {
		name  string
		patch *durablev1.OptionsPatch
		want  *durablev1.ActivityOptions
		set   []string
	}{
		{"NilChangesNothing", nil, code, nil},
		{"EmptyChangesNothing", &durablev1.OptionsPatch{}, code, nil},
		{"MaxAttempts", &durablev1.OptionsPatch{MaxAttempts: proto.Int32(6)}, &durablev1.ActivityOptions{
			TaskQueue: "q", StartToCloseTimeout: dur(time.Minute),
			RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000, Backoff: 2, MaxIntervalMs: 60000, MaxAttempts: 6, NonRetryable: []string{"BadInput"}},
		}, []string{"retry_policy.max_attempts"}},
		{"ZeroIsAValue", &durablev1.OptionsPatch{InitialMs: proto.Int64(0), NonRetryable: &durablev1.StringList{}}, &durablev1.ActivityOptions{
			TaskQueue: "q", StartToCloseTimeout: dur(time.Minute),
			RetryPolicy: &durablev1.RetryPolicy{Backoff: 2, MaxIntervalMs: 60000, MaxAttempts: 2},
		}, []string{"retry_policy.initial_ms", "retry_policy.non_retryable"}},
		{"Timeouts", &durablev1.OptionsPatch{StartToCloseTimeout: dur(time.Hour), HeartbeatTimeout: dur(time.Second), ScheduleToCloseTimeout: dur(2 * time.Hour)}, &durablev1.ActivityOptions{
			TaskQueue: "q", StartToCloseTimeout: dur(time.Hour), HeartbeatTimeout: dur(time.Second), ScheduleToCloseTimeout: dur(2 * time.Hour),
			RetryPolicy: code.GetRetryPolicy(),
		}, []string{"start_to_close_timeout", "heartbeat_timeout", "schedule_to_close_timeout"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, set := engine.ApplyPatch(code, tc.patch)
			if !proto.Equal(got, tc.want) || !slices.Equal(set, tc.set) {
				t.Errorf("ApplyPatch = %v, %v; want %v, %v", got, set, tc.want, tc.set)
			}
			if !proto.Equal(code, before) {
				t.Fatal("ApplyPatch changed its input")
			}
		})
	}
	if got, _ := engine.ApplyPatch(nil, &durablev1.OptionsPatch{MaxAttempts: proto.Int32(3)}); got.GetRetryPolicy().GetMaxAttempts() != 3 {
		t.Errorf("patch of nil options = %v", got)
	}
}
