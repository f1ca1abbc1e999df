package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// serveEngine serves a fresh engine with metrics over gRPC for one test.
func serveEngine(t *testing.T) (*engine.Engine, *Metrics, durablev1.DurableClient) {
	t.Helper()
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	e, err := engine.New(st, engine.Options{PollTimeout: 200 * time.Millisecond, Observer: m, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gs := New(e, Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Metrics: m, TokenKey: testTokenKey}).NewGRPCServer()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		gs.Stop()
		e.Close()
		st.Close()
	})
	return e, m, durablev1.NewDurableClient(conn)
}

func gauge(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return metricValue(f.GetMetric()[0])
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func metricValue(m *dto.Metric) float64 { return m.GetGauge().GetValue() }

// TestFullDiskRefusesWritesWithResourceExhaustedAndServesReads: while the
// engine refuses writes for want of space, a state change is
// ResourceExhausted with the reason as its message, and reads, Watch and
// polls (empty) answer as usual; the alarm gauges say so.
func TestFullDiskRefusesWritesWithResourceExhaustedAndServesReads(t *testing.T) {
	t.Parallel()
	e, m, c := serveEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "before", WorkflowType: "T", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	reason := fmt.Errorf("%w: disk almost full: 3 MiB free of 1 GiB on the volume of /data, below the disk reserve of 256 MiB", engine.ErrNoSpace)
	e.RefuseWrites(reason)
	m.DiskChecked(3<<20, 256<<20, true)

	_, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "during", WorkflowType: "T", TaskQueue: "q"})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || st.Message() != reason.Error() {
		t.Fatalf("start while the disk is full: %v %q, want ResourceExhausted %q", st.Code(), st.Message(), reason)
	}
	if _, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: "before"}); err != nil {
		t.Errorf("describe while the disk is full: %v", err)
	}
	if _, err := c.ListWorkflows(ctx, &durablev1.ListWorkflowsRequest{}); err != nil {
		t.Errorf("list while the disk is full: %v", err)
	}
	poll, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || len(poll.GetTaskToken()) != 0 {
		t.Errorf("poll while the disk is full: %v, %v; want an empty answer", poll, err)
	}
	w, err := c.Watch(ctx, &durablev1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("watch while the disk is full: %v", err)
		}
		if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
			break
		}
	}
	if gauge(t, m, "durable_disk_full") != 1 || gauge(t, m, "durable_writes_refused") != 1 ||
		gauge(t, m, "durable_disk_free_bytes") != 3<<20 || gauge(t, m, "durable_disk_reserve_bytes") != 256<<20 {
		t.Error("the disk gauges do not say the disk is full")
	}

	e.AllowWrites()
	m.DiskChecked(300<<20, 256<<20, false)
	if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "after", WorkflowType: "T", TaskQueue: "q"}); err != nil {
		t.Errorf("start once space is back: %v", err)
	}
	if gauge(t, m, "durable_disk_full") != 0 || gauge(t, m, "durable_writes_refused") != 0 {
		t.Error("the disk gauges still say the disk is full")
	}
}

// TestRefusalForAnotherReasonIsUnavailable: a refusal that is not for space
// (a failed sync halts writes until a restart) is Unavailable.
func TestRefusalForAnotherReasonIsUnavailable(t *testing.T) {
	t.Parallel()
	e, _, c := serveEngine(t)
	e.RefuseWrites(errors.New("writes paused for maintenance"))
	_, err := c.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{WorkflowId: "wf", WorkflowType: "T", TaskQueue: "q"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("start while writes are refused: %v, want Unavailable", err)
	}
}
