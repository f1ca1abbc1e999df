package worker

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// defaultHeartbeatInterval spaces heartbeats of an activity without a
// heartbeat timeout.
const defaultHeartbeatInterval = 30 * time.Second

// heartbeater throttles an attempt's heartbeats: at most one call per
// interval (0.8 x heartbeat timeout), always carrying the latest details, and
// flush sends the last details before the attempt reports.
type heartbeater struct {
	a        *attempt
	interval time.Duration

	mu       sync.Mutex
	pending  []byte
	has      bool
	lastSent time.Time
	started  bool
	closed   bool

	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	flushMu sync.Mutex
}

func newHeartbeater(a *attempt, timeout time.Duration) *heartbeater {
	interval := defaultHeartbeatInterval
	if timeout > 0 {
		interval = timeout * 8 / 10
	}
	return &heartbeater{
		a: a, interval: interval,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// record is activity.Info.HeartbeatFunc: it never blocks on the network.
// Details over the daemon's bound end the attempt at once as
// PayloadTooLarge: the checkpoint could never be saved, and a heartbeat that
// is never sent would only let the lease run out later, as a misleading
// HeartbeatTimeout.
func (h *heartbeater) record(details []byte) {
	if h.a.reported.Load() {
		return // aborted: the lease is being given back
	}
	if limit := h.a.task.GetMaxPayload(); limit > 0 && int64(len(details)) > limit {
		h.a.heartbeatTooLarge(payloadTooLarge("details", len(details), limit, nil))
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.pending, h.has = details, true
	if !h.started {
		h.started = true
		go h.loop()
	}
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

func (h *heartbeater) loop() {
	defer close(h.done)
	for {
		select {
		case <-h.kick:
		case <-h.stop:
			return
		}
		h.mu.Lock()
		wait := time.Until(h.lastSent.Add(h.interval))
		h.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-h.stop:
				t.Stop()
				return
			}
		}
		h.sendPending()
	}
}

// flush stops the throttle and sends details not yet sent. Safe to call more
// than once and from several goroutines.
func (h *heartbeater) flush() {
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	started := h.started
	h.mu.Unlock()
	if started {
		close(h.stop)
		<-h.done
	}
	if !h.a.lost.Load() {
		h.sendPending()
	}
}

func (h *heartbeater) sendPending() {
	h.mu.Lock()
	if !h.has {
		h.mu.Unlock()
		return
	}
	details := h.pending
	h.has = false
	h.lastSent = time.Now()
	h.mu.Unlock()
	h.a.sendHeartbeat(details)
}

// sendHeartbeat extends the lease. A stale or unknown lease cancels the
// attempt's context with ErrLeaseLost.
func (a *attempt) sendHeartbeat(details []byte) {
	ctx, cancel := context.WithTimeout(client.ForWorkflow(context.Background(), a.task.GetWorkflowId()), reportTimeout)
	defer cancel()
	resp, err := a.w.c.Service().RecordHeartbeat(ctx, &durablev1.HeartbeatRequest{
		TaskToken: a.task.GetTaskToken(), Identity: a.w.opts.Identity, Details: details,
	})
	switch status.Code(err) {
	case codes.OK:
		if a.deadline != nil && resp.GetDeadline() != nil {
			a.deadline.Reset(time.Until(resp.GetDeadline().AsTime()))
		}
	case codes.FailedPrecondition, codes.NotFound:
		a.lost.Store(true)
		a.cancel(ErrLeaseLost)
	case codes.InvalidArgument:
		if field, reason, ok := refusedField(err); ok && field == "details" {
			a.heartbeatTooLarge(payloadRefused(field, reason, len(details), nil))
			return
		}
		a.w.log.Warn("heartbeat", "workflow_id", a.task.GetWorkflowId(), "activity_id", a.task.GetActivityId(), "err", err)
	default:
		a.w.log.Warn("heartbeat", "workflow_id", a.task.GetWorkflowId(), "activity_id", a.task.GetActivityId(), "err", err)
	}
}

// heartbeatTooLarge ends the attempt with failure, a PayloadTooLarge for its
// heartbeat details, and says so at ERROR: it is a bug in the activity.
func (a *attempt) heartbeatTooLarge(failure *durablev1.Failure) {
	a.abort(failure, "heartbeat details over the daemon's limit; the attempt fails as "+activity.TypePayloadTooLarge)
}
