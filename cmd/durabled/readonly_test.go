package main

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// TestStartBelowTheReserveOpensReadOnly needs no small volume: a reserve of
// the whole volume is more than is ever free. A data directory with a store
// opens read-only and serves reads; one without a store is refused with a
// message that says why.
func TestStartBelowTheReserveOpensReadOnly(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	sp, err := badgerstore.SpaceOf(filepath.Dir(dataDir))
	if errors.Is(err, badgerstore.ErrSpaceUnknown) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	whole := strconv.FormatUint(sp.Total, 10)

	code, stderr := testdaemon.Run(t, "--listen", "127.0.0.1:0", "--data", dataDir, "--disk-reserve", whole)
	if code != exitError || !strings.Contains(stderr, "not enough disk space to start") || !strings.Contains(stderr, "--disk-reserve") {
		t.Fatalf("start on a full disk without a store: exit %d, want %d with a reason:\n%s", code, exitError, stderr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := testdaemon.Exec(t, dataDir)
	c := durablev1.NewDurableClient(dial(t, d.Addr))
	if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "wf", WorkflowType: "T", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	d.Kill()

	d = testdaemon.Exec(t, dataDir, "--disk-reserve", whole)
	if n := strings.Count(d.Logs(), "level=ERROR"); n != 1 || !strings.Contains(d.Logs(), "the store is open read-only") {
		t.Errorf("want one ERROR line saying the store is read-only:\n%s", d.Logs())
	}
	c = durablev1.NewDurableClient(dial(t, d.Addr))
	if _, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: "wf"}); err != nil {
		t.Errorf("describe on a read-only store: %v", err)
	}
	_, err = c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "wf-2", WorkflowType: "T", TaskQueue: "q"})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "restart durabled") {
		t.Errorf("start on a read-only store: %v, want ResourceExhausted saying to restart", err)
	}
	if got := healthOf(t, d, server.WritesHealthService); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("writes health of a read-only store: %v", got)
	}
	if got := healthOf(t, d, ""); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("overall health of a read-only store: %v", got)
	}
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := d.Wait(); code != 0 {
		t.Fatalf("exit code %d, want 0:\n%s", code, d.Logs())
	}
}

// healthOf asks the daemon for the health of service.
func healthOf(t *testing.T, p *testdaemon.Process, service string) healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(dial(t, p.Addr)).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatalf("health %q: %v", service, err)
	}
	return resp.GetStatus()
}
