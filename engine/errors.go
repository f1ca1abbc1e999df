package engine

import (
	"errors"
	"fmt"
)

// Errors the engine returns; the server maps them to gRPC codes with errors.Is
// and errors.As, so wrapping them keeps the mapping.
var (
	// ErrNotFound: the workflow, activity or task does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a workflow with that id exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrStaleTask: the task token names a lease that has ended (timed out,
	// retried, completed); the caller must stop working on it.
	ErrStaleTask = errors.New("task lease is no longer held")
	// ErrNotDeadLettered: a redrive of an activity that is not dead-lettered.
	ErrNotDeadLettered = errors.New("activity is not dead-lettered")
	// ErrWorkflowClosed: the workflow has completed or failed.
	ErrWorkflowClosed = errors.New("workflow is closed")
	// ErrOperationFinished: the operation has completed or was cancelled;
	// it cannot be cancelled (again).
	ErrOperationFinished = errors.New("operation is finished")
	// ErrClosed: the engine is shutting down.
	ErrClosed = errors.New("engine is closed")
)

// InvalidError is a request the engine cannot apply as given. Field names the
// offending field as it is spelled in durable.proto.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("invalid %s: %s", e.Field, e.Reason) }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
