package server

import (
	"context"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The activity side of the service: the activity task protocol workers drive
// (poll, complete, fail, heartbeat) and the operator calls on dead letters and
// latency.

// PollActivityTask long-polls a task queue for up to max_tasks attempts.
func (s *Server) PollActivityTask(ctx context.Context, req *durablev1.PollActivityTaskRequest) (*durablev1.PollActivityTaskResponse, error) {
	if err := s.check().pollActivityTask(req); err != nil {
		return nil, s.toStatus(ctx, "PollActivityTask", err)
	}
	resp, err := s.engine.PollActivityTask(ctx, req)
	return reply(s, ctx, "PollActivityTask", resp, err)
}

// CompleteActivityTask reports the result of a leased attempt; a stale lease
// is FailedPrecondition.
func (s *Server) CompleteActivityTask(ctx context.Context, req *durablev1.CompleteActivityTaskRequest) (*durablev1.Empty, error) {
	if err := s.check().completeActivityTask(req); err != nil {
		return nil, s.toStatus(ctx, "CompleteActivityTask", err)
	}
	resp, err := s.engine.CompleteActivityTask(ctx, req)
	return reply(s, ctx, "CompleteActivityTask", resp, err)
}

// FailActivityTask reports a failed attempt; the engine retries it,
// dead-letters it or fails it for good. A stale lease is FailedPrecondition,
// so a presumed-dead worker cannot steer a retry.
func (s *Server) FailActivityTask(ctx context.Context, req *durablev1.FailActivityRequest) (*durablev1.Empty, error) {
	if err := s.check().failActivityTask(req); err != nil {
		return nil, s.toStatus(ctx, "FailActivityTask", err)
	}
	resp, err := s.engine.FailActivityTask(ctx, req)
	return reply(s, ctx, "FailActivityTask", resp, err)
}

// RecordHeartbeat extends a leased attempt, stores its details and replies
// with the new lease deadline. A stale lease is FailedPrecondition: the
// worker should cancel the attempt.
func (s *Server) RecordHeartbeat(ctx context.Context, req *durablev1.HeartbeatRequest) (*durablev1.HeartbeatResponse, error) {
	if err := s.check().recordHeartbeat(req); err != nil {
		return nil, s.toStatus(ctx, "RecordHeartbeat", err)
	}
	resp, err := s.engine.RecordHeartbeat(ctx, req)
	return reply(s, ctx, "RecordHeartbeat", resp, err)
}

// ListDeadLetters pages through dead-lettered activities, oldest first.
func (s *Server) ListDeadLetters(ctx context.Context, req *durablev1.ListDeadLettersRequest) (*durablev1.ListDeadLettersResponse, error) {
	if err := s.check().listDeadLetters(req); err != nil {
		return nil, s.toStatus(ctx, "ListDeadLetters", err)
	}
	resp, err := s.engine.ListDeadLetters(ctx, req)
	return reply(s, ctx, "ListDeadLetters", resp, err)
}

// RedriveDeadLetter puts a dead letter back in its queue as attempt 1. An
// unknown activity is NotFound and one that is not dead-lettered is
// FailedPrecondition; neither is ever reported as an outage.
func (s *Server) RedriveDeadLetter(ctx context.Context, req *durablev1.RedriveDeadLetterRequest) (*durablev1.RedriveDeadLetterResponse, error) {
	if err := s.check().redriveDeadLetter(req); err != nil {
		return nil, s.toStatus(ctx, "RedriveDeadLetter", err)
	}
	resp, err := s.engine.RedriveDeadLetter(ctx, req)
	return reply(s, ctx, "RedriveDeadLetter", resp, err)
}

// ListActivityStats returns attempt latency percentiles per activity type.
func (s *Server) ListActivityStats(ctx context.Context, req *durablev1.ListActivityStatsRequest) (*durablev1.ListActivityStatsResponse, error) {
	resp, err := s.engine.ListActivityStats(ctx, req)
	return reply(s, ctx, "ListActivityStats", resp, err)
}
