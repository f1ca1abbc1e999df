package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// watchStream is the server side of one Watch stream. Once it has sent the
// snapshot it holds the first change until release closes, as a reader
// that stopped reading does; synced closes when the snapshot is done.
type watchStream struct {
	grpc.ServerStream
	ctx     context.Context
	release chan struct{}
	synced  chan struct{}
	live    bool
}

func newWatchStream(ctx context.Context) *watchStream {
	return &watchStream{ctx: ctx, release: make(chan struct{}), synced: make(chan struct{})}
}

func (s *watchStream) Context() context.Context { return s.ctx }

func (s *watchStream) Send(ev *durablev1.WatchEvent) error {
	if s.live {
		select {
		case <-s.release:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
	if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
		s.live = true
		close(s.synced)
	}
	return nil
}

// watchServer is a Server over an engine of its own, with its log in buf.
func watchServer(t *testing.T, opts engine.Options) (*Server, *engine.Engine, *syncBuffer) {
	t.Helper()
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	e, err := engine.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	buf := &syncBuffer{}
	return New(e, Options{Logger: slog.New(slog.NewTextHandler(buf, nil))}), e, buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not within 30s", what)
	}
}

// TestLaggingWatcherGetsItsOwnCode: a reader that stops reading while more
// changes happen than its buffer holds ends with Aborted and a message that
// says to resubscribe, logged at INFO, not as an internal error.
func TestLaggingWatcherGetsItsOwnCode(t *testing.T) {
	t.Parallel()
	s, e, logs := watchServer(t, engine.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := newWatchStream(ctx)
	ended := make(chan error, 1)
	go func() { ended <- s.Watch(&durablev1.WatchRequest{}, stream) }()
	waitClosed(t, stream.synced, "snapshot")

	// More changes than the buffer holds, besides the one held in Send.
	const writers = 8
	var g sync.WaitGroup
	for w := range writers {
		g.Go(func() {
			for i := w; i < 4096+writers; i += writers {
				_, err := e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: fmt.Sprintf("lag-%d", i), WorkflowType: "T", TaskQueue: "q"})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	g.Wait()
	close(stream.release)
	var err error
	select {
	case err = <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the lagging watch did not end within 30s")
	}
	st := status.Convert(err)
	if st.Code() != codes.Aborted || !strings.Contains(st.Message(), "resubscribe") {
		t.Fatalf("lagging watch ended with %v %q, want Aborted saying to resubscribe", st.Code(), st.Message())
	}
	log := logs.String()
	if !strings.Contains(log, "level=INFO") || !strings.Contains(log, "resubscribe") || strings.Contains(log, "level=ERROR") {
		t.Fatalf("log: %q, want one INFO line about resubscribing and no ERROR", log)
	}
}

// TestWatchOverTheLimitIsRefused: with --max-watchers 2, a third Watch is
// refused with ResourceExhausted naming the limit and the flag, and one
// may open again once another closed.
func TestWatchOverTheLimitIsRefused(t *testing.T) {
	t.Parallel()
	s, _, logs := watchServer(t, engine.Options{MaxWatchers: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(ctx context.Context) (*watchStream, chan error) {
		stream := newWatchStream(ctx)
		ended := make(chan error, 1)
		go func() { ended <- s.Watch(&durablev1.WatchRequest{}, stream) }()
		return stream, ended
	}
	firstCtx, closeFirst := context.WithCancel(ctx)
	first, firstEnded := open(firstCtx)
	second, _ := open(ctx)
	waitClosed(t, first.synced, "first snapshot")
	waitClosed(t, second.synced, "second snapshot")

	_, ended := open(ctx)
	var err error
	select {
	case err = <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the third watch was neither refused nor ended within 30s")
	}
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--max-watchers 2") {
		t.Fatalf("third watch: %v %q, want ResourceExhausted naming --max-watchers 2", st.Code(), st.Message())
	}
	if log := logs.String(); !strings.Contains(log, "level=WARN") || strings.Contains(log, "level=ERROR") {
		t.Fatalf("log: %q, want a WARN line and no ERROR", log)
	}

	closeFirst()
	<-firstEnded
	again, _ := open(ctx)
	waitClosed(t, again.synced, "snapshot after one closed")
}
