package server

import (
	"context"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The operator calls on operations: work the daemon does at its own pace,
// such as a redrive operation started by RedriveDeadLetters.

// DescribeOperation returns one operation and its progress; an unknown id
// is NotFound.
func (s *Server) DescribeOperation(ctx context.Context, req *durablev1.DescribeOperationRequest) (*durablev1.Operation, error) {
	const method = "DescribeOperation"
	if err := s.check().describeOperation(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	resp, err := s.engine.DescribeOperation(ctx, req)
	return reply(s, ctx, method, resp, err)
}

// ListOperations pages through operations, newest first.
func (s *Server) ListOperations(ctx context.Context, req *durablev1.ListOperationsRequest) (*durablev1.ListOperationsResponse, error) {
	const method = "ListOperations"
	if err := s.check().listOperations(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	resp, err := s.engine.ListOperations(ctx, req)
	return reply(s, ctx, method, resp, err)
}

// CancelOperation stops a running operation, in the audit log under the
// calling principal. An unknown id is NotFound; an operation that has
// already finished is FailedPrecondition.
func (s *Server) CancelOperation(ctx context.Context, req *durablev1.CancelOperationRequest) (*durablev1.Operation, error) {
	const method = "CancelOperation"
	if err := s.check().cancelOperation(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.engine.CancelOperation(ctx, p.actor(), req)
	return reply(s, ctx, method, resp, err)
}
