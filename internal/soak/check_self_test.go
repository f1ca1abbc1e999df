package soak

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/demo/sink"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestCheckerFindsWhatTheDaemonDoesNotHave keeps the soak's checks honest: a
// workflow run without faults checks clean, and each kind of entry the
// daemon never acknowledged, added to the ledger, is reported under its kind.
func TestCheckerFindsWhatTheDaemonDoesNotHave(t *testing.T) {
	t.Parallel()
	book := &addressBook{addr: testdaemon.Start(t, engine.Options{})}
	snk, err := sink.Open(filepath.Join(t.TempDir(), "sink"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snk.Close() })
	led, gts := newLedger(), newGates()
	workers := startWorkers(t, book, led, &activities{sink: snk, gates: gts}, filepath.Join(t.TempDir(), "workers.log"))
	ld := &load{c: book.dial(t, "operator"), ledger: led, gates: gts}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	in := FlowInput{
		Wave: []Step{
			{Index: 0, Kind: kindRetry, Failures: 1, AfterEffect: true},
			{Index: 1, Kind: kindBeat, Chunks: 4},
			{Index: 2, Kind: kindDoom},
			{Index: 3, Kind: kindReject},
		},
		Final: Step{Index: 4, Kind: kindRetry},
		Sleep: 10 * time.Millisecond,
	}
	if !ld.start(ctx, "wf-1", in) {
		t.Fatal("start refused")
	}
	var letter *durablev1.PendingActivity
	for letter == nil {
		letters, err := ld.c.ListDeadLetters(ctx, client.DeadLetterFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(letters) > 0 {
			letter = letters[0]
		} else if pause(ctx, 10*time.Millisecond) != nil {
			t.Fatal("the Doom step never dead-lettered")
		}
	}
	gts.openKey(letter.GetIdempotencyKey())
	ld.redriveOne(ctx, letter, true)
	ld.waitClosed(ctx, "wf-1")
	for _, w := range workers {
		w.Stop() // the ledger is read without its lock from here on
	}

	clean := &checker{c: ld.c, ledger: led, sink: snk}
	clean.check(ctx)
	for _, p := range append(clean.problems, ld.unexpected...) {
		t.Errorf("a run without faults: %s %s: want %s, got %s", p.check, p.subject, p.want, p.got)
	}
	if len(led.completions) != 4 || len(led.failures) != 4 || len(led.redrives) != 1 || clean.tally.completed != 1 {
		t.Fatalf("the run acknowledged %d completions, %d failures, %d redrives and completed %d workflows; want 4, 4, 1, 1",
			len(led.completions), len(led.failures), len(led.redrives), clean.tally.completed)
	}

	// Entries the daemon never acknowledged.
	led.starts["wf-never"] = true
	led.completions = append(led.completions, completionAck{lease: lease{workflowID: "wf-1", activityID: "99", attempt: 1}})
	led.completions = append(led.completions, led.completions[0])
	led.failures = append(led.failures, failureAck{lease: lease{workflowID: "wf-1", activityID: "1", attempt: 1, maxAttempts: 8}, failure: &durablev1.Failure{Message: "f0: never sent"}})
	led.redrives = append(led.redrives, redriveAck{"wf-1", "1", "soak: never"})
	led.wfTasks = append(led.wfTasks, wfTaskAck{workflowID: "wf-1", scheduled: []string{"42"}})
	led.operations = append(led.operations, operationAck{id: "op-404", matched: 1})
	if _, err := snk.Apply(ctx, "wf-1/77"); err != nil {
		t.Fatal(err)
	}
	tampered := &checker{c: ld.c, ledger: led, sink: snk}
	tampered.check(ctx)
	got := map[string]int{}
	for _, p := range tampered.problems {
		got[p.check+" "+p.kind]++
	}
	want := map[string]int{
		"StartWorkflow lost":         1,
		"CompleteActivityTask lost":  1,
		"CompleteActivityTask twice": 1,
		"FailActivityTask lost":      1,
		"RedriveDeadLetter lost":     1,
		"CompleteWorkflowTask lost":  1,
		"RedriveDeadLetters lost":    1,
		"effect lost":                1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%q reported %d times, want %d", k, got[k], n)
		}
	}
	if len(tampered.problems) != len(want) {
		for _, p := range tampered.problems {
			t.Logf("%s %s %s: want %s, got %s", p.kind, p.check, p.subject, p.want, p.got)
		}
		t.Errorf("%d problems, want %d", len(tampered.problems), len(want))
	}
}
