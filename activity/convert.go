package activity

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// FailureFromError is the one way a Go error becomes the Failure the daemon
// records and decides on; ErrorFromFailure is its inverse. Workers, the
// workflow side, the client and the daemon all use this pair, so a failure
// type means the same thing everywhere.
//
// The first *Error in err's %w chain gives the type, the non-retryable flag
// and the details; its message is its Message, else its Cause's text, else
// (when it is wrapped) the whole chain's text. Without an *Error, a context
// deadline is a retryable TypeTimeout and anything else a retryable
// TypeError with err's text. A nil err is a nil Failure. A type that is not
// a valid id (CheckID) is written escaped (EscapeID), so the daemon takes
// the report instead of refusing it and letting the lease run out.
func FailureFromError(err error) *durablev1.Failure {
	if err == nil {
		return nil
	}
	var ae *Error
	if errors.As(err, &ae) {
		f := &durablev1.Failure{
			Type:         ae.Type,
			Message:      ae.Message,
			NonRetryable: ae.NoRetry,
			Details:      bytes.Clone(ae.Details),
		}
		if f.Type == "" {
			f.Type = TypeError
		}
		f.Type = plainType(f.Type)
		if f.Message == "" {
			switch {
			case ae.Cause != nil:
				f.Message = ae.Cause.Error()
			case error(ae) != err:
				f.Message = err.Error()
			}
		}
		return f
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &durablev1.Failure{Type: TypeTimeout, Message: err.Error()}
	}
	return &durablev1.Failure{Type: TypeError, Message: err.Error()}
}

// plainType returns t when it is a valid id, else t escaped and cut to
// MaxIDLen bytes.
func plainType(t string) string {
	if CheckID(t) == nil {
		return t
	}
	t = EscapeID(t)
	for len(t) > MaxIDLen {
		_, size := utf8.DecodeLastRuneInString(t)
		t = t[:len(t)-size]
	}
	return strings.TrimRight(t, " ")
}

// ErrorFromFailure turns a recorded Failure back into an *Error with the same
// type, message, flag and details, so callers inspect it with errors.As and
// IsNonRetryable rather than by string. A Failure without a type reads as
// TypeUnknown. A nil Failure is a nil error.
func ErrorFromFailure(f *durablev1.Failure) error {
	if f == nil {
		return nil
	}
	typ := f.GetType()
	if typ == "" {
		typ = TypeUnknown
	}
	return &Error{
		Type:    typ,
		Message: f.GetMessage(),
		NoRetry: f.GetNonRetryable(),
		Details: bytes.Clone(f.GetDetails()),
	}
}
