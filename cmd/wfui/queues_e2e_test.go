package main

import (
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
	e := newE2E(t, "stall")
	e.daemon()
	waitUntil(t, 20*time.Second, "the daemon answers", func() bool {
		_, err := e.wf("queues")
		return err == nil
	})
	e.console()
	screen := e.screen
	waitUntil(t, 20*time.Second, "the console live", func() bool { return strings.Contains(screen(), "● live") })

	if out, err := e.wf("start", "FlakyDemo", "--id", "stall-1", "--task-queue", "nobody-polls"); err != nil {
		t.Fatalf("wf start: %v: %s", err, out)
	}
	started := time.Now()
	waitUntil(t, 5*time.Second, "the stalled workflow task in the home view", func() bool {
		return stalledRow.MatchString(screen())
	})
	t.Logf("stalled row after %v", time.Since(started).Round(10*time.Millisecond))
	e.keys("6")
	waitUntil(t, 5*time.Second-time.Since(started), "the stalled queue in the queues view", func() bool {
		return stalledQueue.MatchString(screen())
	})
	t.Logf("stalled queue after %v", time.Since(started).Round(10*time.Millisecond))
	e.keys("enter")
	waitUntil(t, 5*time.Second, "the queue's pollers", func() bool {
		s := screen()
		return strings.Contains(s, "task queue nobody-polls") && strings.Contains(s, "none in the last five minutes") &&
			strings.Contains(s, "stall-1")
	})
	e.keys("q")
}

// stalledRow is the home view's row of the workflow task: workflow id,
// "workflow task", "stalled", attempt 1, how long it is overdue.
var stalledRow = regexp.MustCompile(`(?m)^\W*stall-1\s+workflow task\s+stalled\s+1\s+overdue \d`)

// stalledQueue is the queues view's row of the queue: no poller, one
// workflow task ready.
var stalledQueue = regexp.MustCompile(`(?m)^\W*nobody-polls\s+0\s+0\s+\S+\s+1\s+0\s+no poller`)
