package activity_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestFailureFromError checks how every kind of Go error becomes a Failure:
// the first *activity.Error in the %w chain decides type, flag and details,
// wherever it sits; other errors get the system's types.
func TestFailureFromError(t *testing.T) {
	t.Parallel()
	stack := []byte("goroutine 1 [running]:\nmain.charge()")
	tests := []struct {
		name string
		err  error
		want *durablev1.Failure
	}{
		{"Nil", nil, nil},
		{"Retryable", activity.NewError("Busy", "try later"),
			&durablev1.Failure{Type: "Busy", Message: "try later"}},
		{"NonRetryable", activity.NewNonRetryable("CardDeclined", "insufficient funds"),
			&durablev1.Failure{Type: "CardDeclined", Message: "insufficient funds", NonRetryable: true}},
		{"WrappedKeepsOwnMessage", fmt.Errorf("charge: %w", activity.NewNonRetryable("CardDeclined", "no")),
			&durablev1.Failure{Type: "CardDeclined", Message: "no", NonRetryable: true}},
		{"TwiceWrapped", fmt.Errorf("a: %w", fmt.Errorf("b: %w", activity.NewError("ExitCode65", "exit 65"))),
			&durablev1.Failure{Type: "ExitCode65", Message: "exit 65"}},
		{"Details", &activity.Error{Type: activity.TypePanic, Message: "nil map", Details: stack},
			&durablev1.Failure{Type: "Panic", Message: "nil map", Details: stack}},
		{"NoMessageTakesCause", &activity.Error{Type: "Unavailable", Cause: errors.New("connection refused")},
			&durablev1.Failure{Type: "Unavailable", Message: "connection refused"}},
		{"NoMessageWrappedTakesChain", fmt.Errorf("call billing: %w", &activity.Error{Type: "Unavailable"}),
			&durablev1.Failure{Type: "Unavailable", Message: "call billing: Unavailable"}},
		{"NoMessageAtAll", &activity.Error{Type: "Gone"}, &durablev1.Failure{Type: "Gone"}},
		{"NoTypeIsError", &activity.Error{Message: "odd"}, &durablev1.Failure{Type: "Error", Message: "odd"}},
		{"OuterErrorWins", &activity.Error{Type: "Outer", Message: "o", Cause: activity.NewNonRetryable("Inner", "i")},
			&durablev1.Failure{Type: "Outer", Message: "o"}},
		{"Plain", errors.New("boom"), &durablev1.Failure{Type: "Error", Message: "boom"}},
		{"Deadline", fmt.Errorf("call: %w", context.DeadlineExceeded),
			&durablev1.Failure{Type: "Timeout", Message: "call: context deadline exceeded"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := activity.FailureFromError(tc.err); !proto.Equal(got, tc.want) {
				t.Errorf("FailureFromError(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestErrorFromFailure checks the way back: a Failure becomes an
// *activity.Error that errors.As and IsNonRetryable find, also when wrapped.
func TestErrorFromFailure(t *testing.T) {
	t.Parallel()
	if err := activity.ErrorFromFailure(nil); err != nil {
		t.Fatalf("ErrorFromFailure(nil) = %v, want nil", err)
	}
	tests := []struct {
		name string
		f    *durablev1.Failure
		want activity.Error
	}{
		{"Retryable", &durablev1.Failure{Type: "Busy", Message: "later"}, activity.Error{Type: "Busy", Message: "later"}},
		{"NonRetryable", &durablev1.Failure{Type: activity.TypePayloadTooLarge, Message: "result is 3 MB", NonRetryable: true},
			activity.Error{Type: "PayloadTooLarge", Message: "result is 3 MB", NoRetry: true}},
		{"Details", &durablev1.Failure{Type: "Panic", Details: []byte("stack")}, activity.Error{Type: "Panic", Details: []byte("stack")}},
		{"NoTypeIsUnknown", &durablev1.Failure{Message: "?"}, activity.Error{Type: "Unknown", Message: "?"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := fmt.Errorf("workflow failed: %w", activity.ErrorFromFailure(tc.f))
			var ae *activity.Error
			if !errors.As(err, &ae) {
				t.Fatalf("errors.As found no *activity.Error in %v", err)
			}
			if ae.Type != tc.want.Type || ae.Message != tc.want.Message || ae.NoRetry != tc.want.NoRetry ||
				string(ae.Details) != string(tc.want.Details) || ae.Cause != nil {
				t.Errorf("ErrorFromFailure = %+v, want %+v", *ae, tc.want)
			}
			if activity.IsNonRetryable(err) != tc.want.NoRetry {
				t.Errorf("IsNonRetryable = %v, want %v", activity.IsNonRetryable(err), tc.want.NoRetry)
			}
		})
	}
}

// TestFailureRoundTrip: error → Failure → error → Failure changes nothing,
// whether the error was wrapped or not, and Failure → error → Failure is the
// identity for every Failure with a type.
func TestFailureRoundTrip(t *testing.T) {
	t.Parallel()
	errs := []error{
		activity.NewError("Busy", "later"),
		activity.NewNonRetryable("BadSpec", "size must be positive"),
		fmt.Errorf("a: %w", fmt.Errorf("b: %w", activity.NewNonRetryable("ExitCode65", "exit 65"))),
		&activity.Error{Type: activity.TypePanic, Message: "index out of range", Details: []byte("stack")},
		&activity.Error{Type: "Unavailable", Cause: errors.New("connection refused")},
		errors.New("plain"),
		context.DeadlineExceeded,
	}
	for _, err := range errs {
		f := activity.FailureFromError(err)
		back := activity.FailureFromError(activity.ErrorFromFailure(f))
		if !proto.Equal(f, back) {
			t.Errorf("round trip of %v: %v, then %v", err, f, back)
		}
		if activity.IsNonRetryable(err) != activity.IsNonRetryable(activity.ErrorFromFailure(f)) {
			t.Errorf("round trip of %v lost the non-retryable flag", err)
		}
	}
	failures := []*durablev1.Failure{
		{Type: activity.TypeStartToCloseTimeout, Message: "the attempt did not finish within 30s"},
		{Type: activity.TypeCommandsRefused, Message: "commands[0].input: must be at most 1024 bytes, got 4096", NonRetryable: true},
		{Type: "Panic", Message: "boom", Details: []byte{0, 1, 2}},
		{Type: "Empty"},
	}
	for _, f := range failures {
		if back := activity.FailureFromError(activity.ErrorFromFailure(f)); !proto.Equal(f, back) {
			t.Errorf("Failure %v came back as %v", f, back)
		}
	}
}
