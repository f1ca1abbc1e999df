// Command wfui is the on-call console for durabled: live pending activities
// with countdowns, dead letters redriven from the keyboard with a reason for
// the audit log, workflow histories, the audit log itself, and the daemon's
// redrive operations with their progress, cancelled with a key, and the task
// queues with who polls them.
//
//	wfui [--addr HOST:PORT[,...]] [--token T | --token-file F] [--tls] [--tls-ca F]
//	     [--tls-cert F --tls-key F] [--tls-server-name N] [--redrive-rate N]
//
// Every connection flag defaults to its DURABLE_* environment variable, the
// same ones wf and the workers read; the address defaults to 127.0.0.1:7345.
// The console starts even when the daemon is down and connects when it comes
// up. --redrive-rate (default 50) is the pace of the redrive operations it
// starts; an operation goes on in the daemon after the console quits, and
// wfui names on exit those of its own still running.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/tui"
)

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

// run is wfui with its environment passed in: 0 when the operator quits, 2
// for flags or connection settings that cannot be used, 1 when the terminal
// fails.
func run(args []string, getenv func(string) string, stderr io.Writer) int {
	conn := client.ConnectionFromEnv(getenv)
	fs := flag.NewFlagSet("wfui", flag.ContinueOnError)
	fs.SetOutput(stderr)
	conn.RegisterFlags(fs)
	rate := fs.Int("redrive-rate", 50, "dead letters per second the daemon releases in a redrive started here (R)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: wfui [--addr HOST:PORT[,...]] [--token T | --token-file F] [--tls] [--tls-ca F]\n"+
			"            [--tls-cert F --tls-key F] [--tls-server-name N] [--redrive-rate N]\n\n"+
			"The on-call console for durabled: pending activities with live countdowns (1),\n"+
			"dead letters with keyboard redrives (2), workflows and their history (3), the\n"+
			"audit log (4): who redrove what, when, and why, operations (5), and task\n"+
			"queues (6): who polls each, its backlog and the age of its oldest task, and\n"+
			"leases per worker; a queue with work and no poller is first, in red, and a\n"+
			"workflow whose task waits on it shows in the home view as a row \"workflow\n"+
			"task waiting 5.9s on queue X, no poller\" among the overdue ones. A redrive\n"+
			"asks for confirmation; press e there to give a reason for the audit log.\n"+
			"Press ? inside for every key: w opens the workflow of the row under the\n"+
			"cursor as a timeline that follows new events, and y copies its id to the\n"+
			"clipboard through the terminal (OSC 52; it works over SSH, and in tmux with\n"+
			"set -g set-clipboard on).\n\n"+
			"R redrives every dead letter shown as one operation that the daemon runs at\n"+
			"--redrive-rate letters per second; its progress stays on the line under the\n"+
			"header until it finishes. x cancels it (what it released stays released, the\n"+
			"rest stays in the dead-letter queue), as it does any running operation on the\n"+
			"operations screen. Quitting the console does not stop an operation: the\n"+
			"daemon runs it, and wfui says on exit which of its own are still running.\n\n"+
			"Offline, the console keeps what it last knew, as of the time in the header,\n"+
			"with countdowns and ages stopped there; keys that would change anything say\n"+
			"why they cannot, and ctrl+r reconnects without waiting for the next attempt.\n\n"+
			"With durabled --auth, give a token (an operator's to redrive and cancel; a\n"+
			"reader's token may watch and read the audit log). Flags default to the\n"+
			"DURABLE_* variables shown, shared with wf and the workers.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "wfui: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if *rate <= 0 {
		fmt.Fprintf(stderr, "wfui: --redrive-rate must be at least 1 letter per second, not %d\n", *rate)
		return 2
	}

	opts, err := conn.Options()
	if err != nil {
		fmt.Fprintf(stderr, "wfui: %s\n", oneLine(err))
		return 2
	}
	// New does not wait for the daemon: the console shows it as offline and
	// keeps trying, so it can be started first during an incident.
	c, err := client.New(conn.Addr, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "wfui: %s\n", oneLine(err))
		return 2
	}
	defer c.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := tui.New(tui.Params{Backend: tui.NewBackend(c), Addr: conn.Addr, Context: ctx, RedrivesPerSecond: *rate})
	final, err := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx)).Run()
	if err != nil {
		fmt.Fprintf(stderr, "wfui: %v\n", err)
		return 1
	}
	if fm, ok := final.(tui.Model); ok {
		stillRunning(stderr, fm.StillRunning())
	}
	return 0
}

// stillRunning tells the operator, once the console is gone, which of the
// operations it started go on in the daemon and how to follow them.
func stillRunning(w io.Writer, ops []*durablev1.Operation) {
	for _, op := range ops {
		fmt.Fprintf(w, "wfui: %s keeps running in the daemon (%d of %d released when the console quit); "+
			"follow it with: wf ops describe %s · stop it with: wf ops cancel %s\n",
			op.GetId(), op.GetReleased(), op.GetMatched(), op.GetId(), op.GetId())
	}
}

// oneLine keeps an error on one line of stderr, where a certificate and its
// key can each add a reason of their own.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
