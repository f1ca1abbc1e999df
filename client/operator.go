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

// Describe returns a workflow, its pending activities (dead letters
// included) and the activities that finished within the daemon's attempt
// retention, with their attempts, without waiting.
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

// DeadLetterFilter narrows ListDeadLetters and the redrive operations;
// empty fields match anything.
type DeadLetterFilter struct {
	WorkflowID   string
	ActivityType string
	// FailureType matches the type of the failure that dead-lettered it.
	FailureType string
	// FailureFingerprint matches the fingerprint of that failure
	// (activity.Fingerprint): its type and its message with numbers, ids
	// and quoted values normalised.
	FailureFingerprint string
	// DeadLetteredAfter, if set, leaves out letters dead-lettered before it.
	DeadLetteredAfter time.Time
	// DeadLetteredBefore, if set, leaves out letters dead-lettered at or
	// after it.
	DeadLetteredBefore time.Time
}

// IsZero reports whether f matches every letter.
func (f DeadLetterFilter) IsZero() bool {
	return f.WorkflowID == "" && f.ActivityType == "" && f.FailureType == "" && f.FailureFingerprint == "" &&
		f.DeadLetteredAfter.IsZero() && f.DeadLetteredBefore.IsZero()
}

// ListDeadLetters returns every dead-lettered activity matching f, oldest
// first, following page tokens.
func (c *Client) ListDeadLetters(ctx context.Context, f DeadLetterFilter) ([]*durablev1.PendingActivity, error) {
	var out []*durablev1.PendingActivity
	p := f.Proto()
	req := &durablev1.ListDeadLettersRequest{
		WorkflowId: p.GetWorkflowId(), ActivityType: p.GetActivityType(), FailureType: p.GetFailureType(),
		FailureFingerprint: p.GetFailureFingerprint(), DeadLetteredAfter: p.GetDeadLetteredAfter(), DeadLetteredBefore: p.GetDeadLetteredBefore(),
		PageSize: pageSize,
	}
	for {
		resp, err := c.svc.ListDeadLetters(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list dead letters: %w", err)
		}
		out = append(out, resp.GetDeadLetters()...)
		req.NextPageToken = resp.GetNextPageToken()
		if len(req.NextPageToken) == 0 {
			return out, nil
		}
	}
}

// Proto is f as the daemon's filter message.
func (f DeadLetterFilter) Proto() *durablev1.DeadLetterFilter {
	return &durablev1.DeadLetterFilter{
		WorkflowId: f.WorkflowID, ActivityType: f.ActivityType, FailureType: f.FailureType,
		FailureFingerprint: f.FailureFingerprint,
		DeadLetteredAfter:  timestamp(f.DeadLetteredAfter), DeadLetteredBefore: timestamp(f.DeadLetteredBefore),
	}
}

// timestamp is t on the wire; the zero time is unset.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// ActivityFilter narrows ListActivities; zero fields match anything.
type ActivityFilter struct {
	// State is one state: scheduled, started (running), retrying or
	// dead-lettered.
	State durablev1.ActivityState
	// MinAttempt leaves out activities at an earlier attempt.
	MinAttempt int32
	// FailureType and FailureFingerprint match the activity's last failure.
	FailureType        string
	FailureFingerprint string
	ActivityType       string
	TaskQueue          string
}

// ListActivities returns every pending activity across workflows that
// matches f, following page tokens: grouped by state, then by type, then in
// workflow and activity id order. The daemon reads them from an index of
// activities by state and type, not from a scan of workflows, so a narrow
// State and ActivityType make it cheap.
func (c *Client) ListActivities(ctx context.Context, f ActivityFilter) ([]*durablev1.PendingActivity, error) {
	var out []*durablev1.PendingActivity
	req := &durablev1.ListActivitiesRequest{
		State: f.State, MinAttempt: f.MinAttempt, FailureType: f.FailureType, FailureFingerprint: f.FailureFingerprint,
		ActivityType: f.ActivityType, TaskQueue: f.TaskQueue, PageSize: pageSize,
	}
	for {
		resp, err := c.svc.ListActivities(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list activities: %w", err)
		}
		out = append(out, resp.GetActivities()...)
		req.NextPageToken = resp.GetNextPageToken()
		if len(req.NextPageToken) == 0 {
			return out, nil
		}
	}
}

// RedriveOption tunes a redrive.
type RedriveOption func(*redriveOptions)

type redriveOptions struct {
	reason string
	rate   float64
	edit   *durablev1.OptionsPatch
}

// WithReason records why, in the audit log and the ActivityRedriven event.
func WithReason(reason string) RedriveOption {
	return func(o *redriveOptions) { o.reason = reason }
}

// WithRate sets how many letters per second a redrive operation releases;
// the daemon's default is 50.
func WithRate(perSecond float64) RedriveOption {
	return func(o *redriveOptions) { o.rate = perSecond }
}

// WithEdit changes the options of every letter as it goes back (edit then
// redrive): the fields the patch sets replace the activity's own, validated
// like a schedule's. The edit is in each ActivityRedriven event and the
// audit log.
func WithEdit(p *durablev1.OptionsPatch) RedriveOption {
	return func(o *redriveOptions) { o.edit = p }
}

func redriveOpts(opts []RedriveOption) redriveOptions {
	var o redriveOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Redrive puts a dead-lettered activity back in its queue as attempt 1
// (with WithEdit, under changed options) and returns its new state; the
// daemon records it in its audit log under this client's principal.
// Redriving something that is not dead-lettered fails with NotFound or
// FailedPrecondition (see google.golang.org/grpc/status).
func (c *Client) Redrive(ctx context.Context, workflowID, activityID string, opts ...RedriveOption) (*durablev1.PendingActivity, error) {
	o := redriveOpts(opts)
	resp, err := c.svc.RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: workflowID, ActivityId: activityID, Reason: o.reason, Edit: o.edit})
	if err != nil {
		return nil, fmt.Errorf("redrive %s/%s: %w", workflowID, activityID, err)
	}
	return resp.GetActivity(), nil
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
