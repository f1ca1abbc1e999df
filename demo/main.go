// Command demo is the project's proof: FlakyDemo run end to end with real
// processes that die.
//
//	go run ./demo                      the scripted kill-loop demo
//	go run ./demo --json               the same, summary as one JSON object
//	go run ./demo worker --addr ADDR   a demo worker for FlakyDemo and Backlog
//	                                   (wf's connection flags: --token, --tls-ca, …)
//	go run ./demo sink --dir DIR       a standalone effects sink for workers
//
// The scripted demo builds durabled, starts it on a fresh data dir in a
// temporary directory, starts demo workers (this binary, re-executed as
// `demo worker`) and FlakyDemo with fail_rate 0.5, then SIGKILLs workers right
// after the effects sink made one of their effects durable, and SIGKILLs and
// restarts durabled as the workflow's history grows. When the workflow closes
// it prints what happened and exits 1 unless every activity's effect was
// applied exactly once.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tinyllm/durable/demo/flaky"
	"github.com/tinyllm/durable/demo/harness"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "worker":
			os.Exit(runWorker(os.Args[2:]))
		case "sink":
			os.Exit(runSink(os.Args[2:]))
		}
	}
	os.Exit(runDemo(os.Args[1:], os.Stdout, os.Stderr))
}

const demoUsage = `Usage: go run ./demo [flags]
       go run ./demo worker --help
       go run ./demo sink --help

Runs FlakyDemo against a real durabled while workers are SIGKILLed and the
daemon is SIGKILLed and restarted, then prints a summary. Exit status 0 means
every effect was applied exactly once; 1 means it was not, or the run failed.

Flags:
`

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, demoUsage)
		fs.PrintDefaults()
	}
	activities := fs.Int("activities", flaky.DefaultActivities, "FlakyDemo activities")
	failRate := fs.Float64("fail-rate", 0.5, "chance that an attempt fails")
	seed := fs.Int64("seed", 1, "seed of the failure draws")
	kills := fs.Int("worker-kills", 8, "worker SIGKILLs")
	restarts := fs.Int("daemon-restarts", 2, "durabled SIGKILL-and-restarts")
	workers := fs.Int("workers", 3, "workers running at once")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object")
	durabled := fs.String("durabled", "", "durabled binary to use (default: build "+harness.DurabledPackage+")")
	keep := fs.Bool("keep", false, "keep the run's directory (data, sink, logs) and print its path")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	store := fs.String("store", "badger", "the daemon's store: badger (a directory of the run's) or postgres (--postgres-dsn)")
	dsn := fs.String("postgres-dsn", "", "with --store postgres, the `DSN` of a database no other durabled serves; defaults to $DURABLE_POSTGRES_DSN")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}

	if *dsn == "" {
		*dsn = os.Getenv("DURABLE_POSTGRES_DSN")
	}
	switch {
	case *store != "badger" && *store != "postgres":
		fmt.Fprintf(stderr, "demo: --store %q: want badger or postgres\n", *store)
		return 2
	case *store == "postgres" && *dsn == "":
		fmt.Fprintln(stderr, "demo: --store postgres needs --postgres-dsn DSN or $DURABLE_POSTGRES_DSN")
		return 2
	case *store == "badger":
		*dsn = ""
	}

	// The demo runs a daemon of its own: DURABLE_* variables meant for
	// another daemon (a token, TLS files) must not reach its workers.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "DURABLE_") {
			os.Unsetenv(k)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	say := func(format string, a ...any) {
		if !*asJSON {
			fmt.Fprintf(stderr, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
		}
	}

	dir, err := os.MkdirTemp("", "durable-demo-")
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	ok := false
	defer func() {
		if *keep || !ok {
			fmt.Fprintf(stderr, "run directory kept: %s (logs/ has every process's output)\n", dir)
			return
		}
		os.RemoveAll(dir)
	}()

	bin := *durabled
	if bin == "" {
		say("building durabled")
		if bin, err = harness.Build(ctx, dir, "durabled", harness.DurabledPackage); err != nil {
			fmt.Fprintln(stderr, "demo:", err)
			return 1
		}
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	c, err := harness.Start(ctx, harness.Options{Dir: dir, Durabled: bin, Worker: []string{self, "worker"}, PostgresDSN: *dsn})
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	defer c.Close()
	data, workflowID := filepath.Join(dir, "data"), ""
	if *dsn != "" {
		// A database outlives the run: a workflow id of its own per run.
		data, workflowID = "PostgreSQL", fmt.Sprintf("flaky-demo-%d", time.Now().Unix())
	}
	say("durabled (pid %d) listening on %s, data %s; effects sink on %s", c.DaemonPID(), c.Addr(), data, c.SinkAddr())

	r, err := harness.RunFlaky(ctx, c, harness.FlakyPlan{
		WorkflowID:  workflowID,
		Input:       flaky.Input{Activities: *activities, FailRate: *failRate, Seed: *seed},
		Workers:     *workers,
		WorkerKills: *kills, DaemonRestarts: *restarts,
		Timeout: *timeout,
		Logf:    say,
	})
	c.Close()
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return 1
		}
	} else {
		fmt.Fprintln(stdout)
		if err := r.WriteTable(stdout); err != nil {
			return 1
		}
	}
	if !r.ExactlyOnce {
		return 1
	}
	ok = true
	return 0
}
