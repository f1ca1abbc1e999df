package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Watch subscribes to the daemon's change stream: SNAPSHOT events, one
// SNAPSHOT_DONE, then UPSERT and REMOVE events as things change.
//
// Events arrive on the first channel, which is closed when the stream ends.
// The second channel then yields exactly one value, the reason (nil when ctx
// ended or the daemon closed the stream cleanly), and is closed. Cancel ctx to
// unsubscribe; a reader that stops reading must cancel ctx, or the stream
// stalls.
func (c *Client) Watch(ctx context.Context) (<-chan *durablev1.WatchEvent, <-chan error) {
	events := make(chan *durablev1.WatchEvent, 16)
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		defer close(events)
		errc <- c.watch(ctx, events)
	}()
	return events, errc
}

func (c *Client) watch(ctx context.Context, events chan<- *durablev1.WatchEvent) error {
	stream, err := c.svc.Watch(ctx, &durablev1.WatchRequest{})
	if err != nil {
		if contextCause(ctx, err) != nil {
			return nil
		}
		return fmt.Errorf("watch: %w", err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || contextCause(ctx, err) != nil {
				return nil
			}
			return fmt.Errorf("watch: %w", err)
		}
		select {
		case events <- ev:
		case <-ctx.Done():
			return nil
		}
	}
}
