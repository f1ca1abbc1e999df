package server

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/engine"
)

// fieldError is a request field that failed validation. field is the path as
// spelled in durable.proto, e.g. "commands[2].activity_options.retry_policy.backoff".
type fieldError struct {
	field  string
	reason string
}

func (e *fieldError) Error() string { return e.field + ": " + e.reason }

// invalidArgument builds an InvalidArgument status whose message names the
// field and which carries a BadRequest detail, so clients can point at the
// field without parsing the message.
func invalidArgument(field, reason string) error {
	st := status.New(codes.InvalidArgument, field+": "+reason)
	withDetail, err := st.WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: reason}},
	})
	if err != nil {
		return st.Err()
	}
	return withDetail.Err()
}

// toStatus maps err to a gRPC status error: validation and engine errors by
// errors.Is and errors.As, so wrapped errors keep their code; anything it
// does not know becomes Internal and is logged, because it is a bug or an
// outage an operator must see. A nil err stays nil.
func (s *Server) toStatus(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	var fe *fieldError
	var ie *engine.InvalidError
	switch {
	case errors.As(err, &fe):
		return invalidArgument(fe.field, fe.reason)
	case errors.As(err, &ie):
		return invalidArgument(ie.Field, ie.Reason)
	case errors.Is(err, engine.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, engine.ErrAlreadyExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, engine.ErrStaleTask),
		errors.Is(err, engine.ErrNotDeadLettered),
		errors.Is(err, engine.ErrWorkflowClosed),
		errors.Is(err, engine.ErrOperationFinished):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, engine.ErrNoSpace):
		// The disk is short of space: the message says how much is free
		// and what to do; reads go on.
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, engine.ErrWritesRefused):
		// Writes stopped for another reason (a failed sync): a restart
		// brings them back.
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, engine.ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	// A status from below (a failed stream send in Watch) keeps its code.
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if st := se.GRPCStatus(); st != nil && st.Code() != codes.Unknown {
			return st.Err()
		}
	}
	s.opts.Logger.ErrorContext(ctx, "internal error", slog.String("method", method), slog.Any("err", err))
	return status.Error(codes.Internal, "internal error: "+err.Error())
}
