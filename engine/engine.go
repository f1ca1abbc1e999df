package engine

import (
	"context"
	"errors"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

var errUnimplemented = errors.New("unimplemented")

// Engine applies the rules of durable to a Store.
type Engine struct {
	store Store
	opts  Options
}

// New returns an engine over store, recovering its in-memory view from it.
func New(store Store, opts Options) (*Engine, error) {
	return &Engine{store: store, opts: opts.withDefaults()}, nil
}

// Close stops the timer loop and answers every waiting long poll empty. It
// does not close the store.
func (e *Engine) Close() error { return nil }

func (e *Engine) StartWorkflow(ctx context.Context, req *durablev1.StartWorkflowRequest) (*durablev1.StartWorkflowResponse, error) {
	return nil, errUnimplemented
}
func (e *Engine) DescribeWorkflow(ctx context.Context, req *durablev1.DescribeWorkflowRequest) (*durablev1.DescribeWorkflowResponse, error) {
	return nil, errUnimplemented
}
func (e *Engine) GetWorkflowHistory(ctx context.Context, req *durablev1.GetWorkflowHistoryRequest) (*durablev1.GetWorkflowHistoryResponse, error) {
	return nil, errUnimplemented
}
func (e *Engine) ListWorkflows(ctx context.Context, req *durablev1.ListWorkflowsRequest) (*durablev1.ListWorkflowsResponse, error) {
	return nil, errUnimplemented
}
func (e *Engine) ListDeadLetters(ctx context.Context, req *durablev1.ListDeadLettersRequest) (*durablev1.ListDeadLettersResponse, error) {
	return nil, errUnimplemented
}
func (e *Engine) RedriveDeadLetter(ctx context.Context, req *durablev1.RedriveDeadLetterRequest) (*durablev1.RedriveDeadLetterResponse, error) {
	return nil, errUnimplemented
}
func (e *Engine) ListActivityStats(ctx context.Context, req *durablev1.ListActivityStatsRequest) (*durablev1.ListActivityStatsResponse, error) {
	return nil, errUnimplemented
}
// Watch sends a snapshot, then every change, until ctx ends or send fails.
func (e *Engine) Watch(ctx context.Context, req *durablev1.WatchRequest, send func(*durablev1.WatchEvent) error) error {
	return errUnimplemented
}
func (e *Engine) PollWorkflowTask(ctx context.Context, req *durablev1.PollWorkflowTaskRequest) (*durablev1.PollWorkflowTaskResponse, error) {
	return nil, errUnimplemented
}
func (e *Engine) CompleteWorkflowTask(ctx context.Context, req *durablev1.CompleteWorkflowTaskRequest) (*durablev1.Empty, error) {
	return nil, errUnimplemented
}
func (e *Engine) FailWorkflowTask(ctx context.Context, req *durablev1.FailWorkflowTaskRequest) (*durablev1.Empty, error) {
	return nil, errUnimplemented
}
func (e *Engine) PollActivityTask(ctx context.Context, req *durablev1.PollActivityTaskRequest) (*durablev1.PollActivityTaskResponse, error) {
	return nil, errUnimplemented
}
func (e *Engine) CompleteActivityTask(ctx context.Context, req *durablev1.CompleteActivityTaskRequest) (*durablev1.Empty, error) {
	return nil, errUnimplemented
}
func (e *Engine) FailActivityTask(ctx context.Context, req *durablev1.FailActivityRequest) (*durablev1.Empty, error) {
	return nil, errUnimplemented
}
func (e *Engine) RecordHeartbeat(ctx context.Context, req *durablev1.HeartbeatRequest) (*durablev1.HeartbeatResponse, error) {
	return nil, errUnimplemented
}
