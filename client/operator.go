package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

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

// RedriveOption tunes a redrive.
type RedriveOption func(*redriveOptions)

type redriveOptions struct {
	reason string
	rate   float64
}

// WithReason records why, in the audit log and the ActivityRedriven event.
func WithReason(reason string) RedriveOption {
	return func(o *redriveOptions) { o.reason = reason }
}

// WithRate sets how many letters per second a bulk redrive releases; the
// daemon's default is 50.
func WithRate(perSecond float64) RedriveOption {
	return func(o *redriveOptions) { o.rate = perSecond }
}

func redriveOpts(opts []RedriveOption) redriveOptions {
	var o redriveOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Redrive puts a dead-lettered activity back in its queue as attempt 1 and
// returns its new state; the daemon records it in its audit log under this
// client's principal. Redriving something that is not dead-lettered fails
// with NotFound or FailedPrecondition (see google.golang.org/grpc/status).
func (c *Client) Redrive(ctx context.Context, workflowID, activityID string, opts ...RedriveOption) (*durablev1.PendingActivity, error) {
	o := redriveOpts(opts)
	resp, err := c.svc.RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: workflowID, ActivityId: activityID, Reason: o.reason})
	if err != nil {
		return nil, fmt.Errorf("redrive %s/%s: %w", workflowID, activityID, err)
	}
	return resp.GetActivity(), nil
}

// RedriveAll has the daemon redrive every dead letter that matches f (the
// zero filter matches all) at a steady rate (WithRate), and returns when all
// are back in their queues or ctx ends. One audit record covers the call.
func (c *Client) RedriveAll(ctx context.Context, f DeadLetterFilter, opts ...RedriveOption) (*durablev1.RedriveDeadLettersResponse, error) {
	o := redriveOpts(opts)
	resp, err := c.svc.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{
		Filter: f.proto(), Rate: o.rate, Reason: o.reason,
	})
	if err != nil {
		return nil, fmt.Errorf("redrive dead letters: %w", err)
	}
	return resp, nil
}

// RedriveList is RedriveAll for exactly the letters listed, as a console
// that showed them to an operator sends them.
func (c *Client) RedriveList(ctx context.Context, refs []*durablev1.ActivityRef, opts ...RedriveOption) (*durablev1.RedriveDeadLettersResponse, error) {
	o := redriveOpts(opts)
	resp, err := c.svc.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{Activities: refs, Rate: o.rate, Reason: o.reason})
	if err != nil {
		return nil, fmt.Errorf("redrive dead letters: %w", err)
	}
	return resp, nil
}

func (f DeadLetterFilter) proto() *durablev1.DeadLetterFilter {
	return &durablev1.DeadLetterFilter{WorkflowId: f.WorkflowID, ActivityType: f.ActivityType, FailureType: f.FailureType}
}

// AuditQuery narrows AuditLog.
type AuditQuery struct {
	// Since, if set, leaves out records older than it.
	Since time.Time
	// Limit bounds how many records are returned; 0 means all.
	Limit int
}

// AuditLog returns the daemon's audit records of operator actions, newest
// first, following page tokens.
func (c *Client) AuditLog(ctx context.Context, q AuditQuery) ([]*durablev1.AuditRecord, error) {
	var out []*durablev1.AuditRecord
	req := &durablev1.ListAuditRecordsRequest{PageSize: pageSize}
	if !q.Since.IsZero() {
		req.Since = timestamppb.New(q.Since)
	}
	for {
		if q.Limit > 0 {
			req.PageSize = int32(min(pageSize, q.Limit-len(out)))
		}
		resp, err := c.svc.ListAuditRecords(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		out = append(out, resp.GetRecords()...)
		req.NextPageToken = resp.GetNextPageToken()
		if len(req.NextPageToken) == 0 || q.Limit > 0 && len(out) >= q.Limit {
			return out, nil
		}
	}
}

// StatsOption narrows Stats.
type StatsOption func(*durablev1.ListActivityStatsRequest)

// StatsSince counts only attempts that ended at or after t. The daemon keeps
// durations by the hour, so the window starts at the beginning of t's hour,
// and it keeps hours for its --stats-retention (30 days by default).
func StatsSince(t time.Time) StatsOption {
	return func(r *durablev1.ListActivityStatsRequest) { r.Since = timestamppb.New(t) }
}

// Stats returns attempt latency percentiles per activity type, the numbers to
// set timeouts and retry policies from, with the policy in force for each
// type; by default over every attempt the daemon has counted.
func (c *Client) Stats(ctx context.Context, opts ...StatsOption) ([]*durablev1.ActivityTypeStats, error) {
	req := &durablev1.ListActivityStatsRequest{}
	for _, o := range opts {
		o(req)
	}
	resp, err := c.svc.ListActivityStats(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("activity stats: %w", err)
	}
	return resp.GetStats(), nil
}

// PolicyTarget names the activities an override applies to: those of one
// type, on one task queue or (TaskQueue empty) on every queue. An override
// for the type and queue wins over one for the type alone.
type PolicyTarget struct {
	ActivityType string
	TaskQueue    string
}

func (p PolicyTarget) String() string {
	if p.TaskQueue == "" {
		return p.ActivityType
	}
	return p.ActivityType + " on " + p.TaskQueue
}

// SetPolicyOverride replaces the fields patch sets in the options of the
// target's activities: pending ones follow it from their next decision
// (retry, lease, dead letter), new ones from the start, with no worker
// restart. It replaces any override the target had. The daemon records it in
// its audit log with reason, under this client's principal.
func (c *Client) SetPolicyOverride(ctx context.Context, target PolicyTarget, patch *durablev1.OptionsPatch, reason string) (*durablev1.PolicyOverride, error) {
	o, err := c.svc.SetPolicyOverride(ctx, &durablev1.SetPolicyOverrideRequest{
		ActivityType: target.ActivityType, TaskQueue: target.TaskQueue, Patch: patch, Reason: reason,
	})
	if err != nil {
		return nil, fmt.Errorf("set policy override of %s: %w", target, err)
	}
	return o, nil
}

// ListPolicyOverrides returns the overrides in force, by activity type and
// then task queue.
func (c *Client) ListPolicyOverrides(ctx context.Context) ([]*durablev1.PolicyOverride, error) {
	resp, err := c.svc.ListPolicyOverrides(ctx, &durablev1.ListPolicyOverridesRequest{})
	if err != nil {
		return nil, fmt.Errorf("list policy overrides: %w", err)
	}
	return resp.GetOverrides(), nil
}

// OverrideFor returns the override among overrides that applies to an
// activity of activityType on taskQueue, as the daemon picks it: the one for
// that queue, else the one for every queue; nil when neither is there.
func OverrideFor(overrides []*durablev1.PolicyOverride, activityType, taskQueue string) *durablev1.PolicyOverride {
	var anyQueue *durablev1.PolicyOverride
	for _, o := range overrides {
		if o.GetActivityType() != activityType || o.GetCleared() {
			continue
		}
		switch o.GetTaskQueue() {
		case taskQueue:
			return o
		case "":
			anyQueue = o
		}
	}
	return anyQueue
}

// ClearPolicyOverride removes the target's override, recorded in the audit
// log with reason; its activities have their code's options again from their
// next decision. One that is not set fails with NotFound.
func (c *Client) ClearPolicyOverride(ctx context.Context, target PolicyTarget, reason string) (*durablev1.ClearPolicyOverrideResponse, error) {
	resp, err := c.svc.ClearPolicyOverride(ctx, &durablev1.ClearPolicyOverrideRequest{
		ActivityType: target.ActivityType, TaskQueue: target.TaskQueue, Reason: reason,
	})
	if err != nil {
		return nil, fmt.Errorf("clear policy override of %s: %w", target, err)
	}
	return resp, nil
}
