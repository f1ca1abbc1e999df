package tui

import (
	"context"
	"errors"
	"time"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// WatchStream is an open Watch subscription. Recv blocks until the next event
// or until the stream fails; after an error the stream is finished.
type WatchStream interface {
	Recv() (*durablev1.WatchEvent, error)
}

// Backend is everything the console asks of the daemon. NewBackend adapts a
// client.Client; tests substitute a fake.
type Backend interface {
	// Watch subscribes to the snapshot and the changes after it. Cancel ctx
	// to close the stream.
	Watch(ctx context.Context) (WatchStream, error)
	// Redrive puts one dead letter back in its queue as attempt 1; reason
	// goes to the audit log and may be empty.
	Redrive(ctx context.Context, workflowID, activityID, reason string) error
	// RedriveList starts a redrive operation on exactly the letters listed,
	// which the daemon releases at a steady rate, and returns it at once.
	RedriveList(ctx context.Context, p RedriveListParams) (*durablev1.Operation, error)
	// CancelOperation stops a running operation: what it released stays
	// released, the rest stays in the dead-letter queue. reason goes to the
	// audit log and may be empty. It returns the operation as it stopped.
	CancelOperation(ctx context.Context, id, reason string) (*durablev1.Operation, error)
	// AuditLog returns the newest audit records, at most limit of them,
	// newest first.
	AuditLog(ctx context.Context, limit int) ([]*durablev1.AuditRecord, error)
	// Stats returns attempt latency per activity type with the policy in
	// force for each, over the attempts that ended since since (every
	// attempt counted when since is zero).
	Stats(ctx context.Context, since time.Time) ([]*durablev1.ActivityTypeStats, error)
	// History returns a workflow's events in order.
	History(ctx context.Context, workflowID string) ([]*durablev1.HistoryEvent, error)
	// Describe returns a workflow with its pending activities and the ones
	// that finished within the daemon's attempt retention.
	Describe(ctx context.Context, workflowID string) (*durablev1.DescribeWorkflowResponse, error)
	// SetPolicyOverride replaces the override of target with patch; reason
	// goes to the audit log and may be empty.
	SetPolicyOverride(ctx context.Context, target client.PolicyTarget, patch *durablev1.OptionsPatch, reason string) (*durablev1.PolicyOverride, error)
}

// RedriveListParams is one bulk redrive.
type RedriveListParams struct {
	// Refs are the letters, exactly as the operator confirmed them.
	Refs []*durablev1.ActivityRef
	// Reason is why, for the audit log; may be empty.
	Reason string
	// PerSecond is how many letters the daemon releases each second.
	PerSecond int
}

// errStreamEnded is a Watch stream the daemon closed without an error, which
// the console treats like any other loss of the stream: it reconnects.
var errStreamEnded = errors.New("the daemon closed the watch stream")

// NewBackend returns a Backend that calls the daemon through c. Build c with
// client.New: it does not wait for the daemon, so the console starts when the
// daemon is down, shows a failed Watch, and retries with backoff.
func NewBackend(c *client.Client) Backend {
	return clientBackend{c: c}
}

type clientBackend struct {
	c *client.Client
}

func (b clientBackend) Watch(ctx context.Context) (WatchStream, error) {
	events, errc := b.c.Watch(ctx)
	return &chanStream{events: events, errc: errc}, nil
}

func (b clientBackend) Redrive(ctx context.Context, workflowID, activityID, reason string) error {
	_, err := b.c.Redrive(ctx, workflowID, activityID, client.WithReason(reason))
	return err
}

func (b clientBackend) RedriveList(ctx context.Context, p RedriveListParams) (*durablev1.Operation, error) {
	return b.c.RedriveList(ctx, p.Refs, client.WithReason(p.Reason), client.WithRate(float64(p.PerSecond)))
}

func (b clientBackend) CancelOperation(ctx context.Context, id, reason string) (*durablev1.Operation, error) {
	return b.c.CancelOperation(ctx, id, reason)
}

func (b clientBackend) AuditLog(ctx context.Context, limit int) ([]*durablev1.AuditRecord, error) {
	return b.c.AuditLog(ctx, client.AuditQuery{Limit: limit})
}

func (b clientBackend) Stats(ctx context.Context, since time.Time) ([]*durablev1.ActivityTypeStats, error) {
	var opts []client.StatsOption
	if !since.IsZero() {
		opts = append(opts, client.StatsSince(since))
	}
	return b.c.Stats(ctx, opts...)
}

func (b clientBackend) Describe(ctx context.Context, workflowID string) (*durablev1.DescribeWorkflowResponse, error) {
	return b.c.Describe(ctx, workflowID)
}

func (b clientBackend) SetPolicyOverride(ctx context.Context, target client.PolicyTarget, patch *durablev1.OptionsPatch, reason string) (*durablev1.PolicyOverride, error) {
	return b.c.SetPolicyOverride(ctx, target, patch, reason)
}

func (b clientBackend) History(ctx context.Context, workflowID string) ([]*durablev1.HistoryEvent, error) {
	return b.c.History(ctx, workflowID)
}

// chanStream reads the channels of client.Watch as a WatchStream. Recv is
// called by one command at a time.
type chanStream struct {
	events <-chan *durablev1.WatchEvent
	errc   <-chan error
	err    error
}

func (s *chanStream) Recv() (*durablev1.WatchEvent, error) {
	if ev, ok := <-s.events; ok {
		return ev, nil
	}
	if s.err == nil {
		if s.err = <-s.errc; s.err == nil {
			s.err = errStreamEnded
		}
	}
	return nil, s.err
}
