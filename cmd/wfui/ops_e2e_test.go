package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestConsoleCancelsAnOperationWithItsKeyAndLeavesOneRunningOnQuit runs the
// real durabled, a demo worker in outage mode whose activities dead-letter
// on their first attempt, and wfui in tmux redriving at one letter a
// second, so that an operation runs for as long as the test needs. A
// redrive started from the console is cancelled from the operations view
// (5, x, y) and wf ops list says so; a second one is running when q quits
// the console, and wf ops list finds it still running: the daemon runs an
// operation, not the console that started it. Binaries as for
// TestConsoleRedrivesAnOutageEndToEnd.
func TestConsoleCancelsAnOperationWithItsKeyAndLeavesOneRunningOnQuit(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	if testing.Short() {
		t.Skip("builds and runs four binaries; skipped with -short")
	}
	bin := binaries(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	env := append(os.Environ(), "DURABLE_ADDR="+addr)
	start := func(name string, args ...string) {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Env = env
		log, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); log.Close() })
	}
	wf := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "wf"), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// opState is the state wf ops list --json gives operation id, "" while
	// it lists no such operation.
	opState := func(id string) string {
		out, err := wf("ops", "list", "--json")
		if err != nil {
			t.Fatalf("wf ops list --json: %v: %s", err, out)
		}
		var doc struct {
			Operations []struct{ ID, State string }
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("wf ops list --json: %v: %s", err, out)
		}
		for _, op := range doc.Operations {
			if op.ID == id {
				return op.State
			}
		}
		return ""
	}

	start("durabled", "--listen", addr, "--data", filepath.Join(dir, "data"))
	const letters = 20
	waitUntil(t, 20*time.Second, "the workflow starts", func() bool {
		out, err := wf("start", "FlakyDemo", "--id", "ops-1",
			"--input", fmt.Sprintf(`{"activities":%d,"max_attempts":1}`, letters))
		return err == nil || strings.Contains(out, "already")
	})
	start("demo", "worker", "--addr", addr, "--outage", "--sink-dir", filepath.Join(dir, "sink"))

	session := fmt.Sprintf("wfui-ops-%d", os.Getpid())
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	keys := func(k ...string) { tmux(append([]string{"send-keys", "-t", session}, k...)...) }
	tmux("new-session", "-d", "-s", session, "-x", "132", "-y", "43",
		// One letter a second: an operation of twenty runs for twenty seconds.
		filepath.Join(bin, "wfui")+" --addr "+addr+" --redrive-rate 1")
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", session).Run() })
	screen := func() string { return tmux("capture-pane", "-p", "-t", session) }
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last screen:\n%s", last)
		}
	})
	shows := func(what string, re *regexp.Regexp) {
		t.Helper()
		waitUntil(t, 10*time.Second, what, func() bool {
			last = screen()
			return re.MatchString(last)
		})
	}

	keys("2")
	waitUntil(t, 15*time.Second, "every activity dead-lettered", func() bool {
		last = screen()
		return strings.Contains(last, fmt.Sprintf("dead letters (%d)", letters))
	})
	keys("R")
	shows("the redrive's confirmation", redriveDialog)
	keys("y")
	waitUntil(t, 10*time.Second, "op-1 running", func() bool { return opState("op-1") == "OPERATION_STATE_RUNNING" })

	keys("5")
	shows("op-1 in the operations view", runningOp("op-1"))
	keys("x")
	shows("the cancel's confirmation", regexp.MustCompile(`Cancel op-1\?`))
	keys("y")
	waitUntil(t, 10*time.Second, "wf ops list saying op-1 is cancelled", func() bool {
		return opState("op-1") == "OPERATION_STATE_CANCELLED"
	})

	keys("2")
	shows("the dead letters view", regexp.MustCompile(`dead letters \(\d+\)`))
	keys("R")
	shows("the second redrive's confirmation", redriveDialog)
	keys("y")
	waitUntil(t, 10*time.Second, "op-2 running", func() bool { return opState("op-2") == "OPERATION_STATE_RUNNING" })
	keys("q")
	waitUntil(t, 10*time.Second, "the console quitting", func() bool {
		return exec.Command("tmux", "has-session", "-t", session).Run() != nil
	})
	if s := opState("op-2"); s != "OPERATION_STATE_RUNNING" {
		t.Fatalf("after q wf ops list says op-2 is %q, want OPERATION_STATE_RUNNING", s)
	}
}

// redriveDialog is the dead letters view's confirmation of a redrive.
var redriveDialog = regexp.MustCompile(`Redrive \d+ dead letters\?`)

// runningOp matches the operations view's row of running operation id.
func runningOp(id string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^\W*` + regexp.QuoteMeta(id) + `\s+running\s`)
}
