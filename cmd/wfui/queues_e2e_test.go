package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestConsoleShowsAWorkflowStalledOnAQueueNobodyPolls runs the real durabled
// and wfui in tmux, starts a workflow on a queue no worker polls, and finds
// it stalled within five seconds in the home view (its own row, ranked
// with the overdue ones) and in the queues view (the queue in red, "no
// poller"). Binaries as for TestConsoleRedrivesAnOutageEndToEnd.
func TestConsoleShowsAWorkflowStalledOnAQueueNobodyPolls(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	if testing.Short() {
		t.Skip("builds and runs three binaries; skipped with -short")
	}
	bin := binaries(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	env := append(os.Environ(), "DURABLE_ADDR="+addr)

	daemon := exec.Command(filepath.Join(bin, "durabled"), "--listen", addr, "--data", filepath.Join(dir, "data"))
	daemon.Env = env
	log, err := os.Create(filepath.Join(dir, "durabled.log"))
	if err != nil {
		t.Fatal(err)
	}
	daemon.Stdout, daemon.Stderr = log, log
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = daemon.Process.Kill(); _ = daemon.Wait(); log.Close() })
	wf := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "wf"), args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	waitUntil(t, 20*time.Second, "the daemon answers", func() bool {
		_, err := wf("queues")
		return err == nil
	})

	session := fmt.Sprintf("wfui-stall-%d", os.Getpid())
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	tmux("new-session", "-d", "-s", session, "-x", "132", "-y", "43", filepath.Join(bin, "wfui")+" --addr "+addr)
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", session).Run() })
	screen := func() string { return tmux("capture-pane", "-p", "-t", session) }
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last screen:\n%s", screen())
		}
	})
	waitUntil(t, 20*time.Second, "the console live", func() bool { return strings.Contains(screen(), "● live") })

	if out, err := wf("start", "FlakyDemo", "--id", "stall-1", "--task-queue", "nobody-polls"); err != nil {
		t.Fatalf("wf start: %v: %s", err, out)
	}
	started := time.Now()
	waitUntil(t, 5*time.Second, "the stalled workflow task in the home view", func() bool {
		return stalledRow.MatchString(screen())
	})
	t.Logf("stalled row after %v", time.Since(started).Round(10*time.Millisecond))
	tmux("send-keys", "-t", session, "6")
	waitUntil(t, 5*time.Second-time.Since(started), "the stalled queue in the queues view", func() bool {
		return stalledQueue.MatchString(screen())
	})
	t.Logf("stalled queue after %v", time.Since(started).Round(10*time.Millisecond))
	tmux("send-keys", "-t", session, "enter")
	waitUntil(t, 5*time.Second, "the queue's pollers", func() bool {
		s := screen()
		return strings.Contains(s, "task queue nobody-polls") && strings.Contains(s, "none in the last five minutes") &&
			strings.Contains(s, "stall-1")
	})
	tmux("send-keys", "-t", session, "q")
}

// stalledRow is the home view's row of the workflow task: workflow id,
// "workflow task", "stalled", attempt 1, how long it is overdue.
var stalledRow = regexp.MustCompile(`(?m)^\W*stall-1\s+workflow task\s+stalled\s+1\s+overdue \d`)

// stalledQueue is the queues view's row of the queue: no poller, one
// workflow task ready.
var stalledQueue = regexp.MustCompile(`(?m)^\W*nobody-polls\s+0\s+0\s+\S+\s+1\s+0\s+no poller`)
