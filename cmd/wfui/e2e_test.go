package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConsoleRedrivesAnOutageEndToEnd drives the real binaries: durabled, a
// demo worker in outage mode whose FlakyDemo activities dead-letter, then a
// healthy worker, and wfui in tmux redriving every letter from the keyboard
// as an operation whose progress it shows until it completes, and finding
// the redrive in its audit and operations views.
// It needs tmux (and skips without it); it builds the binaries, or takes
// them from $DURABLE_BIN_DIR when set:
//
//	go build -o bin/ ./cmd/durabled ./cmd/wf ./cmd/wfui ./demo
//	DURABLE_BIN_DIR=$PWD/bin go test ./cmd/wfui -run EndToEnd -v
func TestConsoleRedrivesAnOutageEndToEnd(t *testing.T) {
	e := newE2E(t, "e2e")
	for _, b := range []string{"durabled", "demo", "wf", "wfui"} {
		if _, err := os.Stat(filepath.Join(e.bin, b)); err != nil {
			t.Fatalf("binary %s missing: %v", b, err)
		}
	}
	run := func(args ...string) string {
		out, _ := e.wf(args...)
		return out
	}

	e.daemon()
	waitUntil(t, 20*time.Second, "the workflow starts", func() bool {
		out, err := e.wf("start", "FlakyDemo", "--id", "e2e-1", "--input", `{"activities":3,"fail_rate":0.5,"max_attempts":20}`)
		if err != nil {
			t.Logf("wf start: %v: %s", err, out)
		}
		return err == nil || strings.Contains(out, "already")
	})
	// FlakyDemo's own backoff (50 ms doubling to 1 s) retries faster than a
	// screen can be read twice on a loaded machine; an override of a few
	// seconds keeps each countdown on screen long enough to be seen going
	// down, and five attempts still dead-letter every activity in seconds.
	if out, err := e.wf("policy", "set", "FlakyStep", "--initial", "4s", "--max-interval", "4s",
		"--max-attempts", "5", "--reason", "e2e: countdowns a screen can follow"); err != nil {
		t.Fatalf("wf policy set: %v: %s", err, out)
	}
	// The worker starts once the daemon answers: it does not outlive a failed dial.
	outage := e.start("demo", "worker", "--addr", e.addr, "--outage", "--sink-dir", filepath.Join(e.dir, "sink"))

	// A slow rate, so that the progress is on screen for a while.
	e.console("--redrive-rate", "1")
	screen := e.screen

	// A retry countdown is visible and goes down.
	seen := map[string]float64{}
	waitUntil(t, 30*time.Second, "a countdown going down", func() bool {
		for k, v := range countdowns(screen()) {
			if w, ok := seen[k]; ok && v < w {
				return true
			} else if !ok {
				seen[k] = v
			}
		}
		return false
	})

	// Every activity dead-letters during the outage.
	e.keys("2")
	waitUntil(t, 90*time.Second, "dead letters", func() bool {
		return strings.Contains(screen(), "dead letters (3)")
	})

	// The outage ends: the workflow's own policy is back (20 attempts, 50 ms
	// backoff), a healthy worker takes over, and the letters are redriven.
	if out, err := e.wf("policy", "clear", "FlakyStep", "--reason", "e2e: outage over"); err != nil {
		t.Fatalf("wf policy clear: %v: %s", err, out)
	}
	// The healthy worker takes the sink's lock, which the outage worker
	// holds until it is gone: SIGKILL, then wait for the exit.
	_ = outage.Process.Kill()
	_, _ = outage.Process.Wait()
	e.start("demo", "worker", "--addr", e.addr, "--sink-dir", filepath.Join(e.dir, "sink"))
	e.keys("R")
	waitUntil(t, 10*time.Second, "the confirmation", func() bool { return strings.Contains(screen(), "Redrive 3 dead letters?") })
	e.keys("y")
	// One bulk call: the daemon answers at once with the operation it
	// started and releases the letters on its own; the console shows the
	// progress it pushes, then how it ended.
	waitUntil(t, 30*time.Second, "the redrive's progress", func() bool {
		return progressRow.MatchString(screen())
	})
	waitUntil(t, 30*time.Second, "the operation completing", func() bool {
		return strings.Contains(screen(), "op-1 completed: released 3 of 3")
	})

	waitUntil(t, 60*time.Second, "the workflow completes", func() bool {
		return strings.Contains(strings.ToLower(run("describe", "e2e-1", "--json")), "complete")
	})
	if out := run("dlq", "list", "--json"); strings.Contains(strings.ToLower(out), "activity") {
		t.Fatalf("dead letters left after the redrive: %s", out)
	}

	// The audit view has the redrive as one record.
	e.keys("4")
	waitUntil(t, 10*time.Second, "the audit record", func() bool {
		return auditRow.MatchString(screen())
	})
	e.keys("5")
	waitUntil(t, 10*time.Second, "the operation in the operations view", func() bool {
		return opRow.MatchString(screen())
	})
	e.keys("q")
}

// progressRow matches the status line of the console's running redrive.
var progressRow = regexp.MustCompile(`(?m)^op-1 redriving \[[#-]+\] released [0-3] of 3 · re-dead-lettered \d+ · \d+ still in the DLQ · `)

// opRow matches the operations view's row of the completed redrive.
var opRow = regexp.MustCompile(`(?m)^\W*op-1\s+completed\s+local\s+3 listed\s+\[#+\] 3/3\s`)

// auditRow matches the audit view's row of a finished bulk redrive of three
// letters by the daemon's principal when it runs without --auth.
var auditRow = regexp.MustCompile(`(?m)^\W*\S+\s+local\s+operator\s+bulk redrive\s+3/3\s`)

// countdownRow matches an attempts-view row of a retrying activity:
// workflow, activity id, ..., "retrying", n/max, a countdown with tenths or seconds.
var countdownRow = regexp.MustCompile(`^\W*(\S+)\s+(\S+)\s+\S+\s+retrying\s+(\d+)/\d+\s+(\d+(?:\.\d)?)s\b`)

// countdowns reads the retry countdowns on screen, keyed by workflow,
// activity and attempt: a countdown only goes down within one attempt.
func countdowns(screen string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(screen, "\n") {
		if m := countdownRow.FindStringSubmatch(line); m != nil {
			if v, err := strconv.ParseFloat(m[4], 64); err == nil {
				out[m[1]+"/"+m[2]+"#"+m[3]] = v
			}
		}
	}
	return out
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s", d, what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
