package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Watch subscribes to the daemon's change stream: SNAPSHOT events, one
// SNAPSHOT_DONE, then UPSERT and REMOVE events as things change.
//
// A reader that falls too far behind (the daemon buffers 4,096 changes for
// it) loses the stream with codes.Aborted; Watch then subscribes again at
// once, so a fresh snapshot (SNAPSHOT events and a SNAPSHOT_DONE) follows
// on the same channel. Apply every snapshot as the first: stage its items
// and replace the state with them at SNAPSHOT_DONE.
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
	for {
		err := c.watchOnce(ctx, events)
		if status.Code(err) != codes.Aborted || ctx.Err() != nil {
			return err
		}
	}
}

// watchOnce follows one Watch stream.
func (c *Client) watchOnce(ctx context.Context, events chan<- *durablev1.WatchEvent) error {
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
