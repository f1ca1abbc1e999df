package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// buildOnce builds the daemon binary once for all tests of the package.
var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "durabled-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "durabled")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", errors.New(string(out))
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := buildOnce(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

// daemon is one running durabled process.
type daemon struct {
	cmd  *exec.Cmd
	addr string
	logs *lockedBuffer
	done chan struct{} // closed when stderr hits EOF
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) WriteLine(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s + "\n")
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs durabled on 127.0.0.1:0 with dataDir and waits for its
// "listening" log line.
func start(t *testing.T, dataDir string, extra ...string) *daemon {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatalf("build durabled: %v", err)
	}
	args := append([]string{"--listen", "127.0.0.1:0", "--data", dataDir}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{cmd: cmd, logs: &lockedBuffer{}, done: make(chan struct{})}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	addrs := make(chan string, 1)
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			d.logs.WriteLine(line)
			if !strings.Contains(line, "msg=listening") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if a, ok := strings.CutPrefix(f, "addr="); ok {
					addrs <- a
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case d.addr = <-addrs:
	case <-d.done:
		t.Fatalf("durabled exited before listening:\n%s", d.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("no listening line within 30s:\n%s", d.logs.String())
	}
	return d
}

// stop sends SIGTERM and returns the exit code.
func (d *daemon) stop(t *testing.T) int {
	t.Helper()
	d.signal(t)
	return d.wait(t)
}

func (d *daemon) signal(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}

// wait returns the exit code once the process has exited.
func (d *daemon) wait(t *testing.T) int {
	t.Helper()
	<-d.done // stderr closes when the process exits
	err := d.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
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
	conn := dial(t, d.addr)
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
	d.signal(t)
	if resp, err := hw.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health watch after SIGTERM = %v, %v; want NOT_SERVING", resp.GetStatus(), err)
	}
	stopWatch() // an open stream would hold the graceful stop until its bound
	if code := d.wait(t); code != 0 {
		t.Fatalf("exit code %d, want 0; logs:\n%s", code, d.logs.String())
	}
	if err := <-polled; err != nil && status.Code(err) != codes.Unavailable {
		t.Errorf("waiting poll ended with %v, want an empty reply or Unavailable", err)
	}
	if logs := d.logs.String(); !strings.Contains(logs, "msg=stopped") {
		t.Errorf("no \"stopped\" log line:\n%s", logs)
	}

	// The data dir reopens, and what was acknowledged is there.
	d = start(t, dataDir)
	resp, err := durablev1.NewDurableClient(dial(t, d.addr)).DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: "wf-1"})
	if err != nil || resp.GetWorkflow().GetWorkflowType() != "T" {
		t.Fatalf("DescribeWorkflow after restart = %v, %v", resp, err)
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("second exit code %d, want 0; logs:\n%s", code, d.logs.String())
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
		{"Help", []string{"--help"}, exitOK, []string{"-listen", "-data", "-dlq-after-attempts", "-seed", "-max-payload", "-no-sync", "-log-level", "-shutdown-timeout", "trade", "SIGTERM"}},
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
