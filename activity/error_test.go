package activity_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tinyllm/durable/activity"
)

// TestErrorTypes checks that typed and non-retryable failures survive
// wrapping with %w, and that the type never comes from the message.
func TestErrorTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		err          error
		wantType     string
		nonRetryable bool
	}{
		{"NonRetryable", activity.NewNonRetryable("BadSpec", "size must be positive"), "BadSpec", true},
		{"WrappedNonRetryable", fmt.Errorf("charge: %w", activity.NewNonRetryable("BadSpec", "no card")), "BadSpec", true},
		{"TwiceWrapped", fmt.Errorf("a: %w", fmt.Errorf("b: %w", activity.NewNonRetryable("ExitCode65", "exit 65"))), "ExitCode65", true},
		{"Retryable", activity.NewError("Timeout", "upstream slow"), "Timeout", false},
		{"WrappedRetryable", fmt.Errorf("call: %w", activity.NewError("Timeout", "BadSpec in message")), "Timeout", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ae *activity.Error
			if !errors.As(tc.err, &ae) {
				t.Fatalf("errors.As(%v) found no *activity.Error", tc.err)
			}
			if ae.FailureType() != tc.wantType {
				t.Errorf("FailureType = %q, want %q", ae.FailureType(), tc.wantType)
			}
			if ae.NonRetryable() != tc.nonRetryable || activity.IsNonRetryable(tc.err) != tc.nonRetryable {
				t.Errorf("NonRetryable = %v / IsNonRetryable = %v, want %v", ae.NonRetryable(), activity.IsNonRetryable(tc.err), tc.nonRetryable)
			}
		})
	}
	if activity.IsNonRetryable(errors.New("BadSpec: plain error")) {
		t.Error("a plain error whose message names a type is non-retryable")
	}
	cause := errors.New("connection refused")
	wrapped := &activity.Error{Type: "Unavailable", Cause: cause}
	if !errors.Is(wrapped, cause) || wrapped.Error() != "Unavailable: connection refused" {
		t.Errorf("Unwrap/Error of a caused error: %v", wrapped)
	}
}
