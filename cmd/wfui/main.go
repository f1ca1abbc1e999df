// Command wfui is the on-call console for durabled: live pending activities
// with countdowns, dead letters redriven from the keyboard, and workflow
// histories.
//
//	wfui [--addr HOST:PORT]
//
// The address defaults to $DURABLE_ADDR, else 127.0.0.1:7345. The console
// starts even when the daemon is down and connects when it comes up.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/tinyllm/durable/tui"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// defaultAddr is where durabled listens unless told otherwise.
const defaultAddr = "127.0.0.1:7345"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("wfui", flag.ContinueOnError)
	addr := fs.String("addr", envOr("DURABLE_ADDR", defaultAddr), "durabled address (env DURABLE_ADDR)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: wfui [--addr HOST:PORT]\n\n"+
			"The on-call console for durabled: pending activities with live countdowns (1),\n"+
			"dead letters with keyboard redrives (2), workflows and their history (3).\n"+
			"Press ? inside for every key.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "wfui: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}

	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "wfui: %v\n", err)
		return 1
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := tui.New(tui.Params{Backend: tui.NewGRPCBackend(conn), Addr: *addr, Context: ctx})
	if _, err := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx)).Run(); err != nil {
		fmt.Fprintf(os.Stderr, "wfui: %v\n", err)
		return 1
	}
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
