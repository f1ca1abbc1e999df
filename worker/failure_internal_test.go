package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tinyllm/durable/activity"
)

func TestFailureOf(t *testing.T) {
	t.Parallel()
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-expired.Done()
	shutdown, stop := context.WithCancelCause(context.Background())
	stop(ErrWorkerShutdown)
	tests := []struct {
		name         string
		err          error
		ctx          context.Context
		wantType     string
		wantNonRetry bool
	}{
		{"Plain", errors.New("boom"), context.Background(), "Error", false},
		{"Typed", activity.NewError("Busy", "later"), context.Background(), "Busy", false},
		{"WrappedNonRetryable", fmt.Errorf("charge: %w", activity.NewNonRetryable("CardDeclined", "no")), context.Background(), "CardDeclined", true},
		{"Deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), expired, "Timeout", false},
		{"CanceledAtDeadline", context.Canceled, expired, "Timeout", false},
		{"Shutdown", context.Canceled, shutdown, "WorkerShutdown", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := failureOf(tt.err, tt.ctx)
			if f.GetType() != tt.wantType || f.GetNonRetryable() != tt.wantNonRetry {
				t.Fatalf("failureOf(%v) = %v, want type %s non_retryable %v", tt.err, f, tt.wantType, tt.wantNonRetry)
			}
		})
	}
}

func TestRegisterRejectsWrongShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fn   any
	}{
		{"NotAFunc", 42},
		{"NoContext", func(s string) error { return nil }},
		{"NoError", func(ctx context.Context) string { return "" }},
		{"TooManyInputs", func(ctx context.Context, a, b int) error { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := newActivityDef(tt.fn); err == nil {
				t.Fatalf("newActivityDef(%T) accepted a wrong shape", tt.fn)
			}
		})
	}
}
