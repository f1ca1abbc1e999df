// Command demo is the project's proof: FlakyDemo run end to end with real
// processes that die.
//
//	go run ./demo                      the scripted kill-loop demo
//	go run ./demo --json               the same, summary as one JSON object
//	go run ./demo --nodes 3            three durabled nodes on a throwaway
//	                                   PostgreSQL, nodes SIGKILLed at random
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
//
// With --nodes N (N > 1) it starts a throwaway PostgreSQL (initdb in a
// temporary directory, see internal/pgserver) unless --postgres-dsn names a
// database, runs N durabled nodes on it, gives the workers and itself every
// node's address, and SIGKILLs nodes chosen at random instead of the single
// daemon, each started again under its name while the others carry on.
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
	"github.com/tinyllm/durable/internal/pgserver"
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

With --nodes 3, three durabled nodes share one PostgreSQL database (a
throwaway server the demo starts, initdb in a temporary directory, unless
--postgres-dsn names one) and nodes chosen at random are SIGKILLed and
restarted while the others carry on.

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
	restarts := fs.Int("daemon-restarts", 2, "durabled SIGKILL-and-restarts (with --nodes, node kills; default 3 then)")
	nodes := fs.Int("nodes", 1, "run `N` durabled nodes on one PostgreSQL database (above 1: a throwaway server unless --postgres-dsn)")
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
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *nodes < 1:
		fmt.Fprintf(stderr, "demo: --nodes %d: want 1 or more\n", *nodes)
		return 2
	case *nodes > 1 && set["store"] && *store != "postgres":
		fmt.Fprintf(stderr, "demo: --nodes %d shares one PostgreSQL database: leave out --store %s\n", *nodes, *store)
		return 2
	case *nodes > 1:
		*store = "postgres"
		if !set["daemon-restarts"] {
			*restarts = 3
		}
	}
	switch {
	case *store != "badger" && *store != "postgres":
		fmt.Fprintf(stderr, "demo: --store %q: want badger or postgres\n", *store)
		return 2
	case *store == "postgres" && *dsn == "" && *nodes == 1:
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

	// A throwaway server needs PostgreSQL's programs: say so before
	// anything is built.
	throwaway := *nodes > 1 && *dsn == ""
	if throwaway {
		if _, err := pgserver.FindBinaries(); err != nil {
			fmt.Fprintf(stderr, "demo: --nodes %d runs its nodes on a throwaway PostgreSQL: %v; or give --postgres-dsn DSN\n", *nodes, err)
			return 1
		}
	}
	bin := *durabled
	if bin == "" {
		say("building durabled")
		if bin, err = harness.Build(ctx, dir, "durabled", harness.DurabledPackage); err != nil {
			fmt.Fprintln(stderr, "demo:", err)
			return 1
		}
	}
	if *nodes > 1 {
		if ok, err := harness.SupportsNodes(ctx, bin); err != nil || !ok {
			fmt.Fprintf(stderr, "demo: --nodes %d: %s runs one node per database (it has no --node flag)%s\n", *nodes, bin, errSuffix(err))
			return 1
		}
	}
	if throwaway {
		say("starting a throwaway PostgreSQL (initdb in a temporary directory)")
		pg, err := pgserver.Start(pgserver.Options{})
		if err != nil {
			fmt.Fprintln(stderr, "demo: PostgreSQL:", err)
			return 1
		}
		defer pg.Stop()
		if *dsn, err = pg.CreateDatabase(ctx, "durable"); err != nil {
			fmt.Fprintln(stderr, "demo: PostgreSQL:", err)
			return 1
		}
		say("PostgreSQL serving %s", pg.Dir())
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	c, err := harness.Start(ctx, harness.Options{Dir: dir, Durabled: bin, Worker: []string{self, "worker"}, PostgresDSN: *dsn, Nodes: *nodes})
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	defer c.Close()
	data, workflowID := filepath.Join(dir, "data"), ""
	if *dsn != "" && !throwaway {
		// A database outlives the run: a workflow id of its own per run.
		data, workflowID = "PostgreSQL", fmt.Sprintf("flaky-demo-%d", time.Now().Unix())
	}
	if *nodes == 1 {
		say("durabled (pid %d) listening on %s, data %s; effects sink on %s", c.DaemonPID(), c.Addr(), data, c.SinkAddr())
	} else {
		for i := range c.Nodes() {
			say("durabled --node %s (pid %d) listening on %s", c.NodeName(i), c.NodePID(i), c.NodeAddr(i))
		}
		say("%d nodes on one PostgreSQL database; workers dial %s; effects sink on %s", c.Nodes(), c.Addr(), c.SinkAddr())
	}

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

// errSuffix is ": err" for a non-nil err, for a message that may or may not
// have a cause to add.
func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}
