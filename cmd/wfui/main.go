// Command wfui is the on-call console for durabled: live pending activities
// with countdowns, dead letters redriven from the keyboard with a reason for
// the audit log, workflow histories, and the audit log itself.
//
//	wfui [--addr HOST:PORT] [--token T | --token-file F] [--tls] [--tls-ca F]
//	     [--tls-cert F --tls-key F] [--tls-server-name N]
//
// Every flag defaults to its DURABLE_* environment variable, the same ones
// wf and the workers read; the address defaults to 127.0.0.1:7345. The
// console starts even when the daemon is down and connects when it comes up.
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
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: wfui [--addr HOST:PORT] [--token T | --token-file F] [--tls] [--tls-ca F]\n"+
			"            [--tls-cert F --tls-key F] [--tls-server-name N]\n\n"+
			"The on-call console for durabled: pending activities with live countdowns (1),\n"+
			"dead letters with keyboard redrives (2), workflows and their history (3), and\n"+
			"the audit log (4): who redrove what, when, and why. A redrive asks for\n"+
			"confirmation; press e there to give a reason for the audit log.\n"+
			"Press ? inside for every key.\n\n"+
			"With durabled --auth, give a token (an operator's to redrive; a reader's\n"+
			"token may watch and read the audit log). Flags default to the DURABLE_*\n"+
			"variables shown, shared with wf and the workers.\n\nFlags:\n")
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
	m := tui.New(tui.Params{Backend: tui.NewBackend(c), Addr: conn.Addr, Context: ctx})
	if _, err := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx)).Run(); err != nil {
		fmt.Fprintf(stderr, "wfui: %v\n", err)
		return 1
	}
	return 0
}

// oneLine keeps an error on one line of stderr, where a certificate and its
// key can each add a reason of their own.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
