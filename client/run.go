package client

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// DefaultTaskQueue is the queue used when StartOptions leaves it empty.
const DefaultTaskQueue = "default"

// StartOptions say which workflow execution to create.
type StartOptions struct {
	// ID names the execution; empty means a random id. Starting an id that
	// exists is an error, which makes a start with a chosen id idempotent.
	ID string
	// TaskQueue is the queue whose workers run the workflow; empty means
	// DefaultTaskQueue.
	TaskQueue string
}

// Start creates a workflow execution of workflowType with input encoded by the
// client's converter, and returns a handle to wait on it.
func (c *Client) Start(ctx context.Context, workflowType string, input any, opts StartOptions) (*Run, error) {
	if opts.ID == "" {
		opts.ID = rand.Text()
	}
	if opts.TaskQueue == "" {
		opts.TaskQueue = DefaultTaskQueue
	}
	payload, err := c.converter.ToPayload(input)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", workflowType, err)
	}
	resp, err := c.svc.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{
		WorkflowId:   opts.ID,
		WorkflowType: workflowType,
		TaskQueue:    opts.TaskQueue,
		Input:        payload,
	})
	if err != nil {
		return nil, fmt.Errorf("start %s %q: %w", workflowType, opts.ID, err)
	}
	return &Run{ID: resp.GetWorkflowId(), c: c}, nil
}

// Run is a handle to one workflow execution.
type Run struct {
	// ID is the workflow id.
	ID string
	c  *Client
}

// GetRun returns a handle to an existing workflow execution; it does not
// check that the workflow exists (Get does).
func (c *Client) GetRun(id string) *Run { return &Run{ID: id, c: c} }

// Get waits until the workflow closes and decodes its result into result (a
// pointer, or nil to discard it). A failed workflow returns a
// *WorkflowFailedError; errors.As on it also finds the *activity.Error with
// the failure's type. Get returns ctx's error if ctx ends first.
//
// Get waits through daemon restarts: while the daemon is unavailable it
// tries again with a growing pause (up to 5 s).
func (r *Run) Get(ctx context.Context, result any) error {
	pause := 100 * time.Millisecond
	for {
		// Only the workflow: its activities (a record for each one of a
		// fan-out) are of no use here.
		resp, err := r.c.svc.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: r.ID, WaitForClose: true, WorkflowOnly: true})
		if err != nil {
			if cause := contextCause(ctx, err); cause != nil {
				return fmt.Errorf("wait for workflow %q: %w", r.ID, cause)
			}
			if status.Code(err) == codes.Unavailable {
				select {
				case <-time.After(pause):
					pause = min(2*pause, 5*time.Second)
					continue
				case <-ctx.Done():
					return fmt.Errorf("wait for workflow %q: %w", r.ID, ctx.Err())
				}
			}
			return fmt.Errorf("wait for workflow %q: %w", r.ID, err)
		}
		pause = 100 * time.Millisecond
		wf := resp.GetWorkflow()
		switch wf.GetStatus() {
		case durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED:
			if err := r.c.converter.FromPayload(wf.GetResult(), result); err != nil {
				return fmt.Errorf("workflow %q result: %w", r.ID, err)
			}
			return nil
		case durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED:
			return &WorkflowFailedError{WorkflowID: r.ID, Failure: wf.GetFailure()}
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("wait for workflow %q: %w", r.ID, err)
		}
	}
}

// WorkflowFailedError is returned by Run.Get when the workflow failed: its
// function returned an error, or the daemon refused the commands of one of
// its tasks (type activity.TypeCommandsRefused, with the command, the field
// and the bound in the message). It unwraps to an *activity.Error carrying
// the failure's type, message, non-retryable flag and details.
type WorkflowFailedError struct {
	WorkflowID string
	Failure    *durablev1.Failure
}

// Error names the workflow and its failure.
func (e *WorkflowFailedError) Error() string {
	return fmt.Sprintf("workflow %q failed: %v", e.WorkflowID, e.Unwrap())
}

// Unwrap returns the failure as an *activity.Error (activity.ErrorFromFailure).
func (e *WorkflowFailedError) Unwrap() error {
	if e.Failure == nil {
		return &activity.Error{Type: activity.TypeUnknown, Message: "the daemon recorded no failure"}
	}
	return activity.ErrorFromFailure(e.Failure)
}

// IsWorkflowFailed reports whether err says a workflow failed (as opposed to
// the wait itself failing).
func IsWorkflowFailed(err error) bool {
	var wfe *WorkflowFailedError
	return errors.As(err, &wfe)
}

// contextCause returns the context error behind a failed call: ctx's own, or
// the one gRPC reported before ctx's timer fired (gRPC keeps its own copy of
// the deadline), so callers can test for it with errors.Is.
func contextCause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		if _, ok := ctx.Deadline(); ok {
			return context.DeadlineExceeded
		}
	case codes.Canceled:
		return context.Canceled
	}
	return nil
}
