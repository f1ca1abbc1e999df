package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"google.golang.org/grpc"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/demo/backlog"
	"github.com/tinyllm/durable/demo/flaky"
	"github.com/tinyllm/durable/demo/sink"
	"github.com/tinyllm/durable/worker"
)

const workerUsage = `Usage: demo worker [connection flags] [--task-queue Q] [--outage] [--sink-addr ADDR | --sink-dir DIR]

Runs a worker for FlakyDemo and Backlog until interrupted. Effects go to the
sink served at --sink-addr (what the scripted demo does: several workers share
one sink) or, without it, to a sink the worker opens itself in --sink-dir (one
worker per directory; a second one is refused).

With --outage every activity attempt fails with the retryable
DownstreamUnavailable, so the activities dead-letter; restart the worker
without --outage and redrive them (wf dlq redrive) to finish the workflows.

The connection flags (--addr, --token, --token-file, --tls, --tls-*) are
wf's, each defaulting to its DURABLE_* variable. Against a daemon run with
--auth, give the token of a worker principal whose task queues include
--task-queue.

Flags:
`

// runWorker is `demo worker`.
func runWorker(args []string) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), workerUsage)
		fs.PrintDefaults()
	}
	conn := client.ConnectionFromEnv(os.Getenv)
	conn.RegisterFlags(fs)
	queue := fs.String("task-queue", client.DefaultTaskQueue, "task queue to poll")
	outage := fs.Bool("outage", false, "fail every activity attempt with the retryable DownstreamUnavailable")
	sinkAddr := fs.String("sink-addr", "", "address of a shared effects sink (demo sink, or the scripted demo's)")
	sinkDir := fs.String("sink-dir", defaultSinkDir(), "directory of this worker's own effects sink, used without --sink-addr")
	identity := fs.String("identity", "", "name of this worker in history (default host:pid)")
	concurrency := fs.Int("concurrency", 4, "activity attempts run at once")
	logReports := fs.Bool("log-reports", false, "write a line to stderr for every activity report the daemon acknowledged (the kill loop checks none was lost)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts, err := conn.Options()
	if err != nil {
		log.Error("connection flags", "err", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *identity != "" {
		opts = append(opts, client.WithIdentity(*identity))
	}
	if *logReports {
		opts = append(opts, client.WithDialOptions(grpc.WithChainUnaryInterceptor(newReportLog(os.Stderr).intercept)))
	}
	c, err := client.Dial(ctx, conn.Addr, opts...)
	switch {
	case errors.Is(err, client.ErrConfig):
		log.Error("connection flags", "err", err)
		return 2
	case err != nil:
		log.Error("dial durabled", "addr", conn.Addr, "err", err)
		return 3
	}
	defer c.Close()

	var sk sink.Sink
	if *sinkAddr != "" {
		sk = sink.NewClient(*sinkAddr)
	} else {
		st, err := sink.Open(*sinkDir)
		if err != nil {
			log.Error("open sink", "err", err)
			return 1
		}
		defer st.Close()
		log.Info("effects sink", "dir", *sinkDir, "applied", st.Stats().Applied)
		sk = st
	}

	w := worker.New(c, *queue, worker.Options{MaxConcurrentActivities: *concurrency, Logger: log})
	fa := &flaky.Activities{Sink: sk, Outage: *outage}
	ba := &backlog.Activities{Sink: sk, Outage: *outage}
	w.RegisterWorkflowWithName(flaky.FlakyDemo, flaky.WorkflowName)
	w.RegisterActivityWithName(fa.FlakyStep, flaky.ActivityName)
	w.RegisterWorkflowWithName(backlog.Backlog, backlog.WorkflowName)
	w.RegisterActivityWithName(ba.AnalyzeBacklog, backlog.ActivityName)
	log.Info("worker running", "addr", conn.Addr, "task_queue", *queue, "outage", *outage, "pid", os.Getpid())
	if err := w.Run(ctx); err != nil {
		log.Error("worker", "err", err)
		return 1
	}
	return 0
}

// defaultSinkDir is where a worker run by hand keeps its effects: the user's
// state directory ($XDG_STATE_HOME, else ~/.local/state), so the record
// survives the worker.
func defaultSinkDir() string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join(os.TempDir(), "durable-demo", "sink")
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "durable-demo", "sink")
}
