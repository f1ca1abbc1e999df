package tui

import (
	"context"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/grpc"
)

// WatchStream is an open Watch subscription. Recv blocks until the next event
// or until the stream fails; after an error the stream is finished.
type WatchStream interface {
	Recv() (*durablev1.WatchEvent, error)
}

// Backend is everything the console asks of the daemon. NewGRPCBackend adapts a
// gRPC connection; tests substitute a fake.
type Backend interface {
	// Watch subscribes to the snapshot and the changes after it. Cancel ctx
	// to close the stream.
	Watch(ctx context.Context) (WatchStream, error)
	// RedriveDeadLetter puts one dead letter back in its queue as attempt 1.
	RedriveDeadLetter(ctx context.Context, workflowID, activityID string) error
	// GetWorkflowHistory returns a workflow's events in order.
	GetWorkflowHistory(ctx context.Context, workflowID string) ([]*durablev1.HistoryEvent, error)
	// DescribeWorkflow returns a workflow and its pending activities.
	DescribeWorkflow(ctx context.Context, workflowID string) (*durablev1.DescribeWorkflowResponse, error)
}

// NewGRPCBackend returns a Backend that calls the Durable service over conn.
// The console never waits for the connection: a daemon that is down shows up
// as a failed Watch, which the console retries with backoff.
func NewGRPCBackend(conn grpc.ClientConnInterface) Backend {
	return grpcBackend{c: durablev1.NewDurableClient(conn)}
}

type grpcBackend struct {
	c durablev1.DurableClient
}

func (b grpcBackend) Watch(ctx context.Context) (WatchStream, error) {
	return b.c.Watch(ctx, &durablev1.WatchRequest{})
}

func (b grpcBackend) RedriveDeadLetter(ctx context.Context, workflowID, activityID string) error {
	_, err := b.c.RedriveDeadLetter(ctx, &durablev1.RedriveDeadLetterRequest{WorkflowId: workflowID, ActivityId: activityID})
	return err
}

func (b grpcBackend) GetWorkflowHistory(ctx context.Context, workflowID string) ([]*durablev1.HistoryEvent, error) {
	resp, err := b.c.GetWorkflowHistory(ctx, &durablev1.GetWorkflowHistoryRequest{WorkflowId: workflowID})
	if err != nil {
		return nil, err
	}
	return resp.GetEvents(), nil
}

func (b grpcBackend) DescribeWorkflow(ctx context.Context, workflowID string) (*durablev1.DescribeWorkflowResponse, error) {
	return b.c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: workflowID})
}
