package activity

import (
	"errors"
	"fmt"
)

// Error is an activity failure with a type that retry policies can name. The
// worker reports it as a Failure with the same type and flag, wherever it is in
// the %w chain of the returned error. FailureFromError and ErrorFromFailure
// convert it to the wire's Failure and back.
type Error struct {
	// Type is matched against RetryPolicy.non_retryable, never the message.
	Type    string
	Message string
	// NoRetry ends the activity at once instead of retrying it.
	NoRetry bool
	// Details is free-form detail carried with the failure, such as a stack
	// trace; it counts against the daemon's payload limit.
	Details []byte
	// Cause is the underlying error, if any.
	Cause error
}

// NewError returns a retryable failure of the given type.
func NewError(typ, msg string) error {
	return &Error{Type: typ, Message: msg}
}

// NewNonRetryable returns a failure that is never retried: input that cannot
// succeed on another attempt.
func NewNonRetryable(typ, msg string) error {
	return &Error{Type: typ, Message: msg, NoRetry: true}
}

// Error formats the failure as "Type: message".
func (e *Error) Error() string {
	switch {
	case e.Message == "" && e.Cause != nil:
		return fmt.Sprintf("%s: %v", e.Type, e.Cause)
	case e.Message == "":
		return e.Type
	}
	return e.Type + ": " + e.Message
}

// FailureType returns the type that policies match on.
func (e *Error) FailureType() string { return e.Type }

// NonRetryable reports whether the failure ends the activity at once.
func (e *Error) NonRetryable() bool { return e.NoRetry }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// IsNonRetryable reports whether err, or any error it wraps, is an *Error
// marked non-retryable.
func IsNonRetryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.NoRetry
}
