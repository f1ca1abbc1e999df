package client

import (
	"context"
	"fmt"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Nodes returns the durabled nodes serving the daemon's store (by name, each
// alive or not as of the answering node's clock), the node that answered,
// and that clock.
func (c *Client) Nodes(ctx context.Context) (*durablev1.ListNodesResponse, error) {
	resp, err := c.svc.ListNodes(ctx, &durablev1.ListNodesRequest{})
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	return resp, nil
}
