package activity

import (
	"context"
	"time"
)

// Info describes the attempt an activity is running. The worker puts it in the
// activity's context; the helpers below read it from there.
type Info struct {
	WorkflowID   string
	WorkflowType string
	ActivityID   string
	ActivityType string
	TaskQueue    string
	// Attempt is 1 for the first attempt, and again 1 after a redrive.
	Attempt     int
	MaxAttempts int
	// HeartbeatDetails are the details of the last heartbeat of an earlier
	// attempt, nil on a fresh start.
	HeartbeatDetails []byte
	HeartbeatTimeout time.Duration
	ScheduledTime    time.Time
	StartedTime      time.Time
	// Deadline is the lease deadline at the start of the attempt.
	Deadline time.Time
	// HeartbeatFunc sends a heartbeat; the worker sets it. RecordHeartbeat
	// calls it.
	HeartbeatFunc func(details []byte)
}

type infoKey struct{}

// WithInfo returns a context that carries info. Worker implementations and
// tests of activities use it.
func WithInfo(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// GetInfo returns the attempt's Info. It panics when ctx is not an activity's
// context, because every caller of it would otherwise act on a made-up attempt.
func GetInfo(ctx context.Context) *Info {
	info, ok := ctx.Value(infoKey{}).(*Info)
	if !ok || info == nil {
		panic("activity: context is not an activity context (no activity.Info in it)")
	}
	return info
}

// IdempotencyKey returns "<workflow_id>/<activity_id>": the same on every
// attempt and after a redrive, so a receiver that remembers it applies the
// activity's effect once.
func IdempotencyKey(ctx context.Context) string {
	info := GetInfo(ctx)
	return info.WorkflowID + "/" + info.ActivityID
}

// Attempt returns the attempt number, starting at 1.
func Attempt(ctx context.Context) int { return GetInfo(ctx).Attempt }

// HeartbeatDetails returns the details of the last heartbeat recorded by an
// earlier attempt, or nil: the checkpoint to resume from.
func HeartbeatDetails(ctx context.Context) []byte { return GetInfo(ctx).HeartbeatDetails }

// RecordHeartbeat tells the daemon the attempt is alive, extending its lease,
// and stores details as the checkpoint a retry resumes from. The worker
// throttles the calls it sends; the details of the last call always reach the
// daemon before the attempt reports. If the lease was lost, the activity's
// context is cancelled.
func RecordHeartbeat(ctx context.Context, details []byte) {
	info := GetInfo(ctx)
	if info.HeartbeatFunc != nil {
		info.HeartbeatFunc(details)
	}
}
