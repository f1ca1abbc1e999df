package client

import (
	"context"
	"fmt"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// pageSize is what the list helpers ask for per page.
const pageSize = 500

// Describe returns a workflow and its pending activities (dead letters
// included) without waiting.
func (c *Client) Describe(ctx context.Context, id string) (*durablev1.DescribeWorkflowResponse, error) {
	resp, err := c.svc.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: id})
	if err != nil {
		return nil, fmt.Errorf("describe %q: %w", id, err)
	}
	return resp, nil
}

// History returns the events of a workflow, oldest first.
func (c *Client) History(ctx context.Context, id string) ([]*durablev1.HistoryEvent, error) {
	resp, err := c.svc.GetWorkflowHistory(ctx, &durablev1.GetWorkflowHistoryRequest{WorkflowId: id})
	if err != nil {
		return nil, fmt.Errorf("history of %q: %w", id, err)
	}
	return resp.GetEvents(), nil
}

// ListWorkflows returns every workflow in status, following page tokens;
// WORKFLOW_STATUS_UNSPECIFIED means all.
func (c *Client) ListWorkflows(ctx context.Context, status durablev1.WorkflowStatus) ([]*durablev1.WorkflowInfo, error) {
	var out []*durablev1.WorkflowInfo
	var token []byte
	for {
		resp, err := c.svc.ListWorkflows(ctx, &durablev1.ListWorkflowsRequest{Status: status, PageSize: pageSize, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list workflows: %w", err)
		}
		out = append(out, resp.GetWorkflows()...)
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}

// DeadLetterFilter narrows ListDeadLetters; empty fields match anything.
type DeadLetterFilter struct {
	WorkflowID   string
	ActivityType string
	// FailureType matches the type of the failure that dead-lettered it.
	FailureType string
}

// ListDeadLetters returns every dead-lettered activity matching f, oldest
// first, following page tokens.
func (c *Client) ListDeadLetters(ctx context.Context, f DeadLetterFilter) ([]*durablev1.PendingActivity, error) {
	var out []*durablev1.PendingActivity
	var token []byte
	for {
		resp, err := c.svc.ListDeadLetters(ctx, &durablev1.ListDeadLettersRequest{
			WorkflowId:    f.WorkflowID,
			ActivityType:  f.ActivityType,
			FailureType:   f.FailureType,
			PageSize:      pageSize,
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list dead letters: %w", err)
		}
		out = append(out, resp.GetDeadLetters()...)
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return out, nil
		}
	}
}

// Redrive puts a dead-lettered activity back in its queue as attempt 1 and
// returns its new state. Redriving something that is not dead-lettered fails
// with NotFound or FailedPrecondition (see google.golang.org/grpc/status).
func (c *Client) Redrive(ctx context.Context, workflowID, activityID string) (*durablev1.PendingActivity, error) {
	resp, err := c.svc.RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: workflowID, ActivityId: activityID})
	if err != nil {
		return nil, fmt.Errorf("redrive %s/%s: %w", workflowID, activityID, err)
	}
	return resp.GetActivity(), nil
}

// Stats returns attempt latency percentiles per activity type, the numbers to
// set timeouts and retry policies from.
func (c *Client) Stats(ctx context.Context) ([]*durablev1.ActivityTypeStats, error) {
	resp, err := c.svc.ListActivityStats(ctx, &durablev1.ListActivityStatsRequest{})
	if err != nil {
		return nil, fmt.Errorf("activity stats: %w", err)
	}
	return resp.GetStats(), nil
}
