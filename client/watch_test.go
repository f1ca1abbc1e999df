package client_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// laggingDaemon ends the first Watch, after its snapshot, as the daemon ends
// that of a reader that fell behind; later ones stay open.
type laggingDaemon struct {
	durablev1.UnimplementedDurableServer
	calls atomic.Int32
}

func (d *laggingDaemon) Watch(_ *durablev1.WatchRequest, s durablev1.Durable_WatchServer) error {
	n := d.calls.Add(1)
	snap := &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT,
		Workflows: []*durablev1.WorkflowInfo{{WorkflowId: "seen-by-stream-" + string(rune('0'+n))}}}
	for _, ev := range []*durablev1.WatchEvent{snap, {Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE}} {
		if err := s.Send(ev); err != nil {
			return err
		}
	}
	if n == 1 {
		return status.Error(codes.Aborted, "the watch fell more than 4096 events behind; resubscribe for a fresh snapshot")
	}
	<-s.Context().Done()
	return nil
}

// TestWatchResubscribesWhenItFellBehind: when the daemon ends a watch with
// Aborted, Watch subscribes again and the new snapshot follows on the same
// channel, with no error.
func TestWatchResubscribesWhenItFellBehind(t *testing.T) {
	t.Parallel()
	d := &laggingDaemon{}
	gs := grpc.NewServer()
	durablev1.RegisterDurableServer(gs, d)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(l)
	defer gs.Stop()
	c, err := client.New(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events, errc := c.Watch(ctx)
	var got []string
	for ev := range events {
		for _, w := range ev.GetWorkflows() {
			got = append(got, w.GetWorkflowId())
		}
		if len(got) == 2 {
			cancel()
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("Watch ended with %v, want no error", err)
	}
	if len(got) != 2 || got[1] != "seen-by-stream-2" {
		t.Fatalf("workflows seen %v, want those of two snapshots", got)
	}
}
