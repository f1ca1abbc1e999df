package main

import (
	"encoding/json"
	"fmt"
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
	e := newE2E(t, "ops")
	// opState is the state wf ops list --json gives operation id, "" while
	// it lists no such operation.
	opState := func(id string) string {
		out, err := e.wf("ops", "list", "--json")
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

	e.daemon()
	const letters = 20
	waitUntil(t, 20*time.Second, "the workflow starts", func() bool {
		out, err := e.wf("start", "FlakyDemo", "--id", "ops-1",
			"--input", fmt.Sprintf(`{"activities":%d,"max_attempts":1}`, letters))
		return err == nil || strings.Contains(out, "already")
	})
	e.start("demo", "worker", "--addr", e.addr, "--outage", "--sink-dir", filepath.Join(e.dir, "sink"))

	// One letter a second: an operation of twenty runs for twenty seconds.
	e.console("--redrive-rate", "1")
	keys := e.keys
	shows := func(what string, re *regexp.Regexp) { t.Helper(); e.shows(what, 10*time.Second, re) }

	keys("2")
	waitUntil(t, 15*time.Second, "every activity dead-lettered", func() bool {
		return strings.Contains(e.screen(), fmt.Sprintf("dead letters (%d)", letters))
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
	e.quit()
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
