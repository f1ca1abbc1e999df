package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/internal/testdaemon"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testdaemon.Cleanup()
	testpg.Cleanup()
	os.Exit(code)
}

// start runs durabled on 127.0.0.1:0 with dataDir and waits for its
// "listening" log line.
func start(t *testing.T, dataDir string, extra ...string) *testdaemon.Process {
	t.Helper()
	return testdaemon.Exec(t, dataDir, extra...)
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestDaemonServesHealthAndStopsCleanlyOnSIGTERM(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "state", "durable") // created by durabled
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	d := start(t, dataDir)
	conn := dial(t, d.Addr)
	for _, svc := range []string{"", durablev1.Durable_ServiceDesc.ServiceName} {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q = %v, %v; want SERVING", svc, resp.GetStatus(), err)
		}
	}
	// A health watcher hears NOT_SERVING when shutdown begins.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	hw, err := healthpb.NewHealthClient(conn).Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := hw.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health watch = %v, %v; want SERVING", resp.GetStatus(), err)
	}
	c := durablev1.NewDurableClient(conn)
	if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "wf-1", WorkflowType: "T", TaskQueue: "q"}); err != nil {
		t.Fatalf("StartWorkflow: %v", err)
	}
	// A long poll that is waiting when SIGTERM arrives is answered, not cut.
	polled := make(chan error, 1)
	go func() {
		resp, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "idle"})
		if err == nil && len(resp.GetTasks()) > 0 {
			err = errors.New("poll of an idle queue returned tasks")
		}
		polled <- err
	}()
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if resp, err := hw.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health watch after SIGTERM = %v, %v; want NOT_SERVING", resp.GetStatus(), err)
	}
	stopWatch() // an open stream would hold the graceful stop until its bound
	if code := d.Wait(); code != 0 {
		t.Fatalf("exit code %d, want 0; logs:\n%s", code, d.Logs())
	}
	if err := <-polled; err != nil && status.Code(err) != codes.Unavailable {
		t.Errorf("waiting poll ended with %v, want an empty reply or Unavailable", err)
	}
	if logs := d.Logs(); !strings.Contains(logs, "msg=stopped") {
		t.Errorf("no \"stopped\" log line:\n%s", logs)
	}

	// The data dir reopens, and what was acknowledged is there.
	d = start(t, dataDir)
	resp, err := durablev1.NewDurableClient(dial(t, d.Addr)).DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: "wf-1"})
	if err != nil || resp.GetWorkflow().GetWorkflowType() != "T" {
		t.Fatalf("DescribeWorkflow after restart = %v, %v", resp, err)
	}
	if err := d.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := d.Wait(); code != 0 {
		t.Fatalf("second exit code %d, want 0; logs:\n%s", code, d.Logs())
	}
	st, err := badgerstore.Open(dataDir, badgerstore.Options{})
	if err != nil {
		t.Fatalf("reopen data dir: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		code int
		want []string // substrings of stdout+stderr
	}{
		{"Help", []string{"--help"}, exitOK, []string{"-listen", "-data", "-dlq-after-attempts", "-seed", "-max-payload", "-no-sync", "-log-level", "-shutdown-timeout", "trade", "SIGTERM",
			"-tls-cert", "-tls-key", "-tls-client-ca", "-auth", "-insecure", "-reflection", "-metrics-listen", "-audit-retention", "-attempt-retention",
			"-stats-retention", "SIGHUP", "durabled token", "-disk-reserve", "ResourceExhausted", "-max-watchers", "(default 256)", "Aborted",
			"-memory-budget", "default 256 MiB", "Not bounded", "384MiB", "-store", "-postgres-dsn", "DURABLE_POSTGRES_DSN", "Any number of durabled nodes may serve one",
			"-node", "(default HOSTNAME-PID)"}},
		{"NodeWithSpace", []string{"--node", "node 1"}, exitUsage, []string{`--node: the name "node 1" has ' ' at byte 4`}},
		{"NodeEmpty", []string{"--node", ""}, exitUsage, []string{"--node: the name is empty"}},
		{"UnknownStore", []string{"--store", "mysql"}, exitUsage, []string{`--store "mysql": want badger or postgres`}},
		{"DSNWithoutPostgres", []string{"--postgres-dsn", "host=/tmp dbname=d"}, exitUsage, []string{"--postgres-dsn needs --store postgres"}},
		{"PostgresWithoutDSN", []string{"--store", "postgres"}, exitUsage, []string{"--store postgres needs --postgres-dsn", "DURABLE_POSTGRES_DSN"}},
		{"PostgresBadDSN", []string{"--store", "postgres", "--postgres-dsn", "port=notanumber"}, exitUsage, []string{"--postgres-dsn"}},
		{"PostgresWithBadgerFlags", []string{"--store", "postgres", "--postgres-dsn", "host=/tmp dbname=d", "--data", "/tmp/x", "--memory-budget", "1GiB", "--no-sync"}, exitUsage,
			[]string{"--data, --memory-budget, --no-sync: only for --store badger"}},
		{"MemoryBudgetTooSmall", []string{"--memory-budget", "32MiB"}, exitUsage, []string{"--memory-budget 32 MiB is too small", "at least 64 MiB"}},
		{"MemoryBudgetNotASize", []string{"--memory-budget", "lots"}, exitUsage, []string{"-memory-budget", "256MiB, 1GiB or 500MB", `"lots"`}},
		{"MemoryBudgetAShare", []string{"--memory-budget", "5%"}, exitUsage, []string{"-memory-budget", "256MiB, 1GiB or 500MB"}},
		{"ZeroWatchers", []string{"--max-watchers", "0"}, exitUsage, []string{"--max-watchers"}},
		{"BadDiskReserve", []string{"--disk-reserve", "lots"}, exitUsage, []string{"-disk-reserve", "256MiB", "5%"}},
		{"DiskReserveOfAllTheVolume", []string{"--disk-reserve", "100%"}, exitUsage, []string{"-disk-reserve"}},
		{"TLSCertWithoutKey", []string{"--tls-cert", "c.pem"}, exitUsage, []string{"--tls-cert and --tls-key go together"}},
		{"ClientCAWithoutTLS", []string{"--tls-client-ca", "ca.pem"}, exitUsage, []string{"--tls-client-ca needs --tls-cert"}},
		{"ShortAuditRetention", []string{"--audit-retention", "10m"}, exitUsage, []string{"--audit-retention"}},
		{"AuditRetentionInDays", []string{"--audit-retention", "3x"}, exitUsage, []string{"90d"}},
		{"ShortStatsRetention", []string{"--stats-retention", "30m"}, exitUsage, []string{"--stats-retention"}},
		{"ShortAttemptRetention", []string{"--attempt-retention", "30s"}, exitUsage, []string{"--attempt-retention must be at least 1m"}},
		{"AttemptRetentionInDays", []string{"--attempt-retention", "7days"}, exitUsage, []string{"-attempt-retention", "90d"}},
		{"MissingAuthFile", []string{"--auth", "/nonexistent/auth.json"}, exitUsage, []string{"auth file", "no such file"}},
		{"MissingCertFile", []string{"--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"}, exitUsage, []string{"tls key pair"}},
		{"TokenHelp", []string{"token", "--help"}, exitOK, []string{"token_sha256", "--role"}},
		{"TokenBadRole", []string{"token", "--name", "x", "--role", "admin"}, exitUsage, []string{"not one of worker, reader, operator"}},
		{"TokenInvisibleName", []string{"token", "--name", "ali\u200dce", "--role", "reader"}, exitUsage, []string{"U+200D ZERO WIDTH JOINER"}},
		{"TokenBlankQueue", []string{"token", "--name", "w", "--role", "worker", "--task-queues", "a, b"}, exitUsage, []string{"--task-queues", "must not begin with a space"}},
		{"Token", []string{"token", "--name", "w", "--role", "worker", "--task-queues", "a,b"}, exitOK, []string{"token         dur_", `"task_queues":["a","b"]`}},
		{"UnknownFlag", []string{"--nope"}, exitUsage, []string{"-nope"}},
		{"ExtraArgument", []string{"serve"}, exitUsage, []string{"unexpected arguments"}},
		{"ZeroDLQ", []string{"--dlq-after-attempts", "0"}, exitUsage, []string{"--dlq-after-attempts"}},
		{"NegativePayload", []string{"--max-payload", "-1"}, exitUsage, []string{"--max-payload"}},
		{"BadLogLevel", []string{"--log-level", "loud"}, exitUsage, []string{"-log-level"}},
		{"DataDirIsAFile", []string{"--data", "/dev/null/x", "--listen", "127.0.0.1:0"}, exitError, []string{"data dir"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			out := stdout.String() + stderr.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestDefaultDataDirFollowsXDG(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/var/lib/x")
	if got, want := defaultDataDir(), filepath.Join("/var/lib/x", "durable"); got != want {
		t.Errorf("with XDG_STATE_HOME: %q, want %q", got, want)
	}
	t.Setenv("XDG_STATE_HOME", "relative/ignored")
	t.Setenv("HOME", "/home/op")
	if got, want := defaultDataDir(), filepath.Join("/home/op", ".local", "state", "durable"); got != want {
		t.Errorf("without XDG_STATE_HOME: %q, want %q", got, want)
	}
}
