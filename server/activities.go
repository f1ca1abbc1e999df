package server

import (
	"context"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The activity side of the service: the activity task protocol workers drive
// (poll, complete, fail, heartbeat) and the operator calls on dead letters and
// latency.

// PollActivityTask long-polls a task queue for up to max_tasks attempts,
// seals each lease into a token for the calling principal and tells the
// worker the payload bound its reports are held to.
func (s *Server) PollActivityTask(ctx context.Context, req *durablev1.PollActivityTaskRequest) (*durablev1.PollActivityTaskResponse, error) {
	const method = "PollActivityTask"
	if err := s.check().pollActivityTask(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	if err := s.checkQueue(ctx, method, req.GetTaskQueue()); err != nil {
		return nil, err
	}
	resp, err := s.engine.PollActivityTask(ctx, req)
	if err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	for _, t := range resp.GetTasks() {
		if t.TaskToken, err = s.seal(ctx, t.GetTaskToken()); err != nil {
			return nil, err
		}
		t.MaxPayload = int64(s.opts.MaxPayload)
	}
	return resp, nil
}

// CompleteActivityTask reports the result of a leased attempt; a stale lease
// or a token this daemon did not issue is FailedPrecondition.
func (s *Server) CompleteActivityTask(ctx context.Context, req *durablev1.CompleteActivityTaskRequest) (*durablev1.Empty, error) {
	const method = "CompleteActivityTask"
	if err := s.check().completeActivityTask(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	body, err := s.open(ctx, req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	req.TaskToken = body
	resp, err := s.engine.CompleteActivityTask(ctx, req)
	return reply(s, ctx, method, resp, err)
}

// FailActivityTask reports a failed attempt; the engine retries it,
// dead-letters it or fails it for good. A stale lease is FailedPrecondition,
// so a presumed-dead worker cannot steer a retry.
func (s *Server) FailActivityTask(ctx context.Context, req *durablev1.FailActivityRequest) (*durablev1.Empty, error) {
	const method = "FailActivityTask"
	if err := s.check().failActivityTask(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	body, err := s.open(ctx, req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	req.TaskToken = body
	resp, err := s.engine.FailActivityTask(ctx, req)
	return reply(s, ctx, method, resp, err)
}

// RecordHeartbeat extends a leased attempt, stores its details and replies
// with the new lease deadline. A stale lease is FailedPrecondition: the
// worker should cancel the attempt.
func (s *Server) RecordHeartbeat(ctx context.Context, req *durablev1.HeartbeatRequest) (*durablev1.HeartbeatResponse, error) {
	const method = "RecordHeartbeat"
	if err := s.check().recordHeartbeat(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	body, err := s.open(ctx, req.GetTaskToken())
	if err != nil {
		return nil, err
	}
	req.TaskToken = body
	resp, err := s.engine.RecordHeartbeat(ctx, req)
	return reply(s, ctx, method, resp, err)
}

// ListDeadLetters pages through dead-lettered activities, oldest first.
func (s *Server) ListDeadLetters(ctx context.Context, req *durablev1.ListDeadLettersRequest) (*durablev1.ListDeadLettersResponse, error) {
	if err := s.check().listDeadLetters(req); err != nil {
		return nil, s.toStatus(ctx, "ListDeadLetters", err)
	}
	resp, err := s.engine.ListDeadLetters(ctx, req)
	return reply(s, ctx, "ListDeadLetters", resp, err)
}

// ListActivities pages through pending activities across workflows by state
// and the other filters.
func (s *Server) ListActivities(ctx context.Context, req *durablev1.ListActivitiesRequest) (*durablev1.ListActivitiesResponse, error) {
	if err := s.check().listActivities(req); err != nil {
		return nil, s.toStatus(ctx, "ListActivities", err)
	}
	resp, err := s.engine.ListActivities(ctx, req)
	return reply(s, ctx, "ListActivities", resp, err)
}

// RedriveDeadLetter puts a dead letter back in its queue as attempt 1, in
// the audit log under the calling principal. An unknown activity is NotFound
// and one that is not dead-lettered is FailedPrecondition; neither is ever
// reported as an outage.
func (s *Server) RedriveDeadLetter(ctx context.Context, req *durablev1.RedriveDeadLetterRequest) (*durablev1.RedriveDeadLetterResponse, error) {
	const method = "RedriveDeadLetter"
	if err := s.check().redriveDeadLetter(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.engine.RedriveDeadLetter(ctx, p.actor(), req)
	return reply(s, ctx, method, resp, err)
}

// RedriveDeadLetters starts a redrive operation that puts back every dead
// letter a filter matches (or the ones listed) at the requested rate, and
// answers at once with it; in the audit log under the calling principal.
// With dry_run it only says what would match.
func (s *Server) RedriveDeadLetters(ctx context.Context, req *durablev1.RedriveDeadLettersRequest) (*durablev1.RedriveDeadLettersResponse, error) {
	const method = "RedriveDeadLetters"
	if err := s.check().redriveDeadLetters(req); err != nil {
		return nil, s.toStatus(ctx, method, err)
	}
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := s.engine.RedriveDeadLetters(ctx, p.actor(), req)
	return reply(s, ctx, method, resp, err)
}

// ListActivityStats returns attempt latency percentiles per activity type,
// over the hours since the time asked for, or all of them.
func (s *Server) ListActivityStats(ctx context.Context, req *durablev1.ListActivityStatsRequest) (*durablev1.ListActivityStatsResponse, error) {
	if err := s.check().listActivityStats(req); err != nil {
		return nil, s.toStatus(ctx, "ListActivityStats", err)
	}
	resp, err := s.engine.ListActivityStats(ctx, req)
	return reply(s, ctx, "ListActivityStats", resp, err)
}

// ListAuditRecords pages through the audit log, newest first.
func (s *Server) ListAuditRecords(ctx context.Context, req *durablev1.ListAuditRecordsRequest) (*durablev1.ListAuditRecordsResponse, error) {
	if err := s.check().listAuditRecords(req); err != nil {
		return nil, s.toStatus(ctx, "ListAuditRecords", err)
	}
	resp, err := s.engine.ListAuditRecords(ctx, req)
	return reply(s, ctx, "ListAuditRecords", resp, err)
}

// ListTaskQueues returns who polls each task queue, what waits in it and
// who holds its leases, from the engine's memory.
func (s *Server) ListTaskQueues(ctx context.Context, req *durablev1.ListTaskQueuesRequest) (*durablev1.ListTaskQueuesResponse, error) {
	if err := s.check().listTaskQueues(req); err != nil {
		return nil, s.toStatus(ctx, "ListTaskQueues", err)
	}
	resp, err := s.engine.ListTaskQueues(ctx, req)
	return reply(s, ctx, "ListTaskQueues", resp, err)
}

// seal turns a lease body from the engine into the token the calling
// principal receives.
func (s *Server) seal(ctx context.Context, body []byte) ([]byte, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	return sealToken(s.opts.TokenKey, p.Name, body), nil
}

// open checks that a token is one this daemon sealed for the calling
// principal and returns the lease body for the engine.
func (s *Server) open(ctx context.Context, token []byte) ([]byte, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	body, err := openToken(s.opts.TokenKey, p.Name, token)
	if err != nil {
		s.denied(ctx, "/task_token", p.Name, err)
	}
	return body, err
}
