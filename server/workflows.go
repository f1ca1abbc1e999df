package server

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The workflow side of the service: the workflow task protocol workers drive
// and the operator calls that read workflows.

func (s *Server) check() validator { return validator{maxPayload: s.opts.MaxPayload} }

// reply returns resp with the mapped error, or nil and the error.
func reply[T any](s *Server, ctx context.Context, method string, resp *T, err error) (*T, error) {
	if err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	return resp, nil
}

// StartWorkflow validates the ids and input and creates the workflow; a
// worker may start workflows only on its own task queues.
func (s *Server) StartWorkflow(ctx context.Context, req *durablev1.StartWorkflowRequest) (*durablev1.StartWorkflowResponse, error) {
	if err := s.check().startWorkflow(req); err != nil {
		return nil, s.toStatus(ctx, "StartWorkflow", err)
	}
	if err := s.checkQueue(ctx, "StartWorkflow", req.GetTaskQueue()); err != nil {
		return nil, err
	}
	resp, err := s.engine.StartWorkflow(ctx, req)
	return reply(s, ctx, "StartWorkflow", resp, err)
}

// DescribeWorkflow returns a workflow and its pending activities.
func (s *Server) DescribeWorkflow(ctx context.Context, req *durablev1.DescribeWorkflowRequest) (*durablev1.DescribeWorkflowResponse, error) {
	if err := s.check().describeWorkflow(req); err != nil {
		return nil, s.toStatus(ctx, "DescribeWorkflow", err)
	}
	resp, err := s.engine.DescribeWorkflow(ctx, req)
	return reply(s, ctx, "DescribeWorkflow", resp, err)
}

// GetWorkflowHistory returns a workflow's events in order.
func (s *Server) GetWorkflowHistory(ctx context.Context, req *durablev1.GetWorkflowHistoryRequest) (*durablev1.GetWorkflowHistoryResponse, error) {
	if err := s.check().getWorkflowHistory(req); err != nil {
		return nil, s.toStatus(ctx, "GetWorkflowHistory", err)
	}
	resp, err := s.engine.GetWorkflowHistory(ctx, req)
	return reply(s, ctx, "GetWorkflowHistory", resp, err)
}

// ListWorkflows pages through workflows.
func (s *Server) ListWorkflows(ctx context.Context, req *durablev1.ListWorkflowsRequest) (*durablev1.ListWorkflowsResponse, error) {
	if err := s.check().listWorkflows(req); err != nil {
		return nil, s.toStatus(ctx, "ListWorkflows", err)
	}
	resp, err := s.engine.ListWorkflows(ctx, req)
	return reply(s, ctx, "ListWorkflows", resp, err)
}

// PollWorkflowTask long-polls a task queue for a workflow task.
func (s *Server) PollWorkflowTask(ctx context.Context, req *durablev1.PollWorkflowTaskRequest) (*durablev1.PollWorkflowTaskResponse, error) {
	if err := s.check().pollWorkflowTask(req); err != nil {
		return nil, s.toStatus(ctx, "PollWorkflowTask", err)
	}
	if err := s.checkQueue(ctx, "PollWorkflowTask", req.GetTaskQueue()); err != nil {
		return nil, err
	}
	resp, err := s.engine.PollWorkflowTask(ctx, req)
	if err != nil {
		return nil, s.toStatus(ctx, "PollWorkflowTask", err)
	}
	if len(resp.GetTaskToken()) > 0 {
		if resp.TaskToken, err = s.seal(ctx, resp.GetTaskToken()); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// CompleteWorkflowTask validates every command and applies them. A worker
// limited to some task queues may schedule activities only on those (an
// activity without a queue runs on the workflow's, which it polled).
func (s *Server) CompleteWorkflowTask(ctx context.Context, req *durablev1.CompleteWorkflowTaskRequest) (*durablev1.Empty, error) {
	if err := s.check().completeWorkflowTask(req); err != nil {
		return nil, s.toStatus(ctx, "CompleteWorkflowTask", err)
	}
	for _, c := range req.GetCommands() {
		if q := c.GetActivityOptions().GetTaskQueue(); q != "" {
			if err := s.checkQueue(ctx, "CompleteWorkflowTask", q); err != nil {
				return nil, err
			}
		}
	}
	body, err := s.open(ctx, req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	req.TaskToken = body
	resp, err := s.engine.CompleteWorkflowTask(ctx, req)
	return reply(s, ctx, "CompleteWorkflowTask", resp, err)
}

// FailWorkflowTask reports that the workflow code could not make progress.
func (s *Server) FailWorkflowTask(ctx context.Context, req *durablev1.FailWorkflowTaskRequest) (*durablev1.Empty, error) {
	if err := s.check().failWorkflowTask(req); err != nil {
		return nil, s.toStatus(ctx, "FailWorkflowTask", err)
	}
	body, err := s.open(ctx, req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	req.TaskToken = body
	resp, err := s.engine.FailWorkflowTask(ctx, req)
	return reply(s, ctx, "FailWorkflowTask", resp, err)
}

// GetWorkflowTaskHistory returns the start of a leased workflow task's
// history, for a worker sent only its new events. The token is the
// credential: a worker may read the history of the task it leased.
func (s *Server) GetWorkflowTaskHistory(ctx context.Context, req *durablev1.GetWorkflowTaskHistoryRequest) (*durablev1.GetWorkflowHistoryResponse, error) {
	if err := s.check().getWorkflowTaskHistory(req); err != nil {
		return nil, s.toStatus(ctx, "GetWorkflowTaskHistory", err)
	}
	body, err := s.open(ctx, req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	req.TaskToken = body
	resp, err := s.engine.GetWorkflowTaskHistory(ctx, req)
	return reply(s, ctx, "GetWorkflowTaskHistory", resp, err)
}

// Watch streams the engine's snapshot and changes until the client goes
// away or the engine closes. Two endings are the reader's to act on, not
// faults of the daemon, and are logged as such: more watchers than
// --max-watchers allows (ResourceExhausted: close one or raise the limit,
// and back off before trying again), and a reader that fell more than the
// buffer behind, or whose snapshot streamed while more records changed than
// the daemon keeps for it (Aborted: the changes it missed are gone;
// resubscribe at once for a fresh snapshot). Aborted is gRPC's "retry at a higher level"
// — here, the whole subscription — and is kept apart from
// ResourceExhausted, after which an immediate retry would fail again.
func (s *Server) Watch(req *durablev1.WatchRequest, stream durablev1.Durable_WatchServer) error {
	ctx := stream.Context()
	err := s.engine.Watch(ctx, req, stream.Send)
	var limit *engine.WatchLimitError
	switch {
	case errors.As(err, &limit):
		s.opts.Logger.WarnContext(ctx, "watch refused", slog.Int("max_watchers", limit.Limit), slog.String("peer", peerOf(ctx)))
		return status.Errorf(codes.ResourceExhausted,
			"%v (--max-watchers %d): close a watch or raise the limit, then try again", err, limit.Limit)
	case errors.Is(err, engine.ErrWatchLagged):
		s.opts.Logger.InfoContext(ctx, "watch fell behind; told to resubscribe", slog.String("peer", peerOf(ctx)))
		return status.Error(codes.Aborted, err.Error())
	}
	return s.toStatus(ctx, "Watch", err)
}

// peerOf is the address of the caller, for logs.
func peerOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
