//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tinyllm/durable/demo/harness"
	"github.com/tinyllm/durable/internal/pgserver"
	"github.com/tinyllm/durable/internal/testpg"
)

var (
	durabledBin string
	demoBin     string
)

// TestMain builds durabled and this command once; DURABLED, if set, names a
// durabled binary to use instead.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "demo-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if durabledBin = os.Getenv("DURABLED"); durabledBin == "" {
			if durabledBin, err = harness.Build(ctx, dir, "durabled", harness.DurabledPackage); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		if demoBin, err = harness.Build(ctx, dir, "demo", "github.com/tinyllm/durable/demo"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer testpg.Cleanup()
		return m.Run()
	}())
}

// TestDemoOnPostgres runs the demo twice on one PostgreSQL database, the DSN
// from the environment: each run completes exactly once, and the second is
// not refused for the first one's workflow.
func TestDemoOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	for run := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, demoBin, "--json", "--durabled", durabledBin, "--store", "postgres",
			"--activities", "6", "--worker-kills", "2", "--daemon-restarts", "1", "--seed", "4")
		cmd.Env = append(os.Environ(), "DURABLE_POSTGRES_DSN="+dsn)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("run %d: demo --store postgres: %v\nstderr:\n%s", run, err, stderr.String())
		}
		var got map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("run %d: stdout is not one JSON object: %v\n%s", run, err, stdout.String())
		}
		if got["completed"] != true || got["exactly_once"] != true || got["effects_applied"] != 6.0 {
			t.Errorf("run %d: completed %v, exactly once %v, effects applied %v; want true, true, 6", run, got["completed"], got["exactly_once"], got["effects_applied"])
		}
	}
}

func TestDemoStoreFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--store", "mysql"}, `--store "mysql"`},
		{[]string{"--store", "postgres"}, "--store postgres needs --postgres-dsn"},
	} {
		cmd := exec.Command(demoBin, tc.args...)
		cmd.Env = append(os.Environ(), "DURABLE_POSTGRES_DSN=")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("demo %v: %v, want exit 2 saying %q:\n%s", tc.args, err, tc.want, out)
		}
	}
}

// TestDemoAcrossNodes runs `demo --nodes 3`: the demo starts a PostgreSQL
// of its own and three nodes on it, kills nodes, and every effect is
// applied exactly once with nothing acknowledged lost.
func TestDemoAcrossNodes(t *testing.T) {
	t.Parallel()
	if _, err := pgserver.FindBinaries(); err != nil {
		if os.Getenv(testpg.RequireEnv) == "require" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if ok, err := harness.SupportsNodes(ctx, durabledBin); err != nil || !ok {
		t.Skipf("this durabled runs one node per database (%v)", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, demoBin, "--nodes", "3", "--json", "--durabled", durabledBin,
		"--activities", "8", "--worker-kills", "2", "--daemon-restarts", "2", "--seed", "5")
	cmd.Env = append(os.Environ(), "DURABLE_POSTGRES_DSN=")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo --nodes 3: %v\nstderr:\n%s", err, stderr.String())
	}
	var got map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	for key, want := range map[string]any{"completed": true, "exactly_once": true, "effects_applied": 8.0, "nodes": 3.0} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	if kills, _ := got["node_kills"].(map[string]any); len(kills) == 0 {
		t.Errorf("no node was killed: %v", got["node_kills"])
	}
}

func TestDemoNodesFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "0"}, "--nodes 0: want 1 or more"},
		{[]string{"--nodes", "3", "--store", "badger"}, "leave out --store badger"},
	} {
		out, err := exec.Command(demoBin, tc.args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("demo %v: %v, want exit 2 saying %q:\n%s", tc.args, err, tc.want, out)
		}
	}
}

func TestDemoJSONSummary(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, demoBin, "--json", "--durabled", durabledBin,
		"--activities", "6", "--worker-kills", "2", "--daemon-restarts", "1", "--seed", "4")
	// Connection settings for some other daemon stay out of the demo's own.
	cmd.Env = append(os.Environ(), "DURABLE_TLS=1", "DURABLE_TOKEN=elsewhere", "DURABLE_ADDR=192.0.2.1:7345")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("demo --json: %v\nstderr:\n%s", err, stderr.String())
	}
	var got map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout.String())
	}
	for key, want := range map[string]any{
		"completed": true, "activities": 6.0, "effects_applied": 6.0,
		"worker_kills": 2.0, "daemon_restarts": 1.0, "exactly_once": true,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	if _, ok := got["duplicate_deliveries"].(float64); !ok {
		t.Errorf("duplicate_deliveries missing: %v", got)
	}
}

// TestDemoInterruptLeavesNoChildren sends SIGINT to a running demo and checks
// that the daemon and every worker it started are gone when it exits.
func TestDemoInterruptLeavesNoChildren(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, demoBin, "--durabled", durabledBin, "--activities", "200")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pidRE := regexp.MustCompile(`\(pid (\d+)\)`)
	var pids []int
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	interrupted := false
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		if m := pidRE.FindStringSubmatch(line); m != nil {
			pid, _ := strconv.Atoi(m[1])
			pids = append(pids, pid)
		}
		// Interrupt once workers run and one was killed, mid-run.
		if !interrupted && strings.Contains(line, "SIGKILL worker") {
			interrupted = true
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !interrupted || !errors.As(err, &ee) {
		t.Fatalf("interrupted=%v, exit %v; want an interrupted run that fails\n%s", interrupted, err, log.String())
	}
	if len(pids) < 4 {
		t.Fatalf("saw %d child pids, want the daemon and 3 workers at least\n%s", len(pids), log.String())
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("child %d still exists after the demo exited (kill 0: %v)", pid, err)
		}
	}
	if m := regexp.MustCompile(`run directory kept: (\S+)`).FindStringSubmatch(log.String()); m != nil {
		os.RemoveAll(m[1])
	}
}
