// Command wf is the scriptable command line of a durable daemon: start
// workflows, inspect them and their pending activities, list and redrive dead
// letters, follow the live change stream and read activity latency stats.
//
// Every command prints aligned tables for people and, with --json, one JSON
// document for scripts. Exit codes: 0 ok, 1 the operation failed, 2 usage
// error, 3 the daemon is unreachable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/client"
)

// Exit codes that scripts can rely on.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnreachable = 3
)

// defaultTimeout bounds a command unless --timeout says otherwise; watch and
// start --wait run until done unless --timeout is given.
const defaultTimeout = 30 * time.Second

// getenv is swapped by tests.
var getenv = os.Getenv

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// globals are the flags every command accepts, before or after its name.
type globals struct {
	addr    string
	json    bool
	timeout time.Duration
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.addr, "addr", g.addr, "daemon address host:port (env DURABLE_ADDR)")
	fs.BoolVar(&g.json, "json", g.json, "print one JSON document for scripts instead of tables")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up after this long (0: 30s, or no limit for watch and start --wait)")
}

// cli is one invocation: where output goes and the global flags.
type cli struct {
	stdout, stderr io.Writer
	g              globals
	// help prints the --help text of the command being run.
	help func()
}

// command is one subcommand of wf.
type command struct {
	name    string
	summary string
	run     func(c *cli, args []string) int
}

func commands() []command {
	return []command{
		{"start", "start a workflow, optionally wait for its result", (*cli).start},
		{"describe", "show a workflow and its pending activities", (*cli).describe},
		{"history", "print the events of a workflow", (*cli).history},
		{"list", "list workflows", (*cli).list},
		{"dlq", "list and redrive dead-lettered activities", (*cli).dlq},
		{"watch", "follow the daemon's live change stream", (*cli).watch},
		{"stats", "activity latency percentiles; check a retry policy against them", (*cli).stats},
	}
}

const mainUsage = `wf is the command line of a durable daemon.

Usage:
  wf [global flags] COMMAND [args] [flags]

Commands:
%s
Global flags (accepted before or after the command):
  --addr HOST:PORT   daemon address (default %s, env DURABLE_ADDR)
  --json             one JSON document for scripts instead of tables
  --timeout D        give up after D (default 30s; watch and start --wait: no limit)

Exit codes: 0 ok, 1 operation failed, 2 usage error, 3 daemon unreachable.

Examples:
  wf start FlakyDemo --fail-rate 0.5 --activities 3 --wait
  wf describe order-42
  wf dlq list --activity-type ChargeCard
  wf dlq redrive --all --failure-type Timeout
  wf --json list --status running | jq -r '.workflows[].workflowId'

Run 'wf COMMAND --help' for the flags and examples of a command.
`

func printMainUsage(w io.Writer) {
	var b strings.Builder
	for _, cmd := range commands() {
		fmt.Fprintf(&b, "  %-9s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(w, mainUsage, b.String(), client.DefaultAddr)
}

// run is wf with its arguments and outputs; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	c.g.addr = client.DefaultAddr
	if env := getenv("DURABLE_ADDR"); env != "" {
		c.g.addr = env
	}
	fs := flag.NewFlagSet("wf", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printMainUsage(stdout)
			return exitOK
		}
		return c.usageError("", err.Error())
	}
	rest := fs.Args()
	if len(rest) == 0 {
		printMainUsage(stderr)
		return exitUsage
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) == 0 {
			printMainUsage(stdout)
			return exitOK
		}
		name, rest = rest[0], []string{"--help"}
	}
	for _, cmd := range commands() {
		if cmd.name == name {
			return cmd.run(c, rest)
		}
	}
	return c.usageError("", fmt.Sprintf("unknown command %q", name))
}

// usageError reports a usage mistake of command cmd ("" for wf itself).
func (c *cli) usageError(cmd, msg string) int {
	help := "wf --help"
	prefix := "wf"
	if cmd != "" {
		help = "wf " + cmd + " --help"
		prefix = "wf " + cmd
	}
	fmt.Fprintf(c.stderr, "%s: %s (see '%s')\n", prefix, msg, help)
	return exitUsage
}

// flagSet returns a FlagSet for a subcommand with the global flags on it.
// usage is the text printed by --help above the flag list.
func (c *cli) flagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("wf "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // parse prints help on --help and one line on errors
	c.help = func() {
		fmt.Fprint(c.stdout, strings.TrimLeft(usage, "\n"))
		fmt.Fprintln(c.stdout, "\nFlags:")
		fs.SetOutput(c.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	c.g.register(fs)
	return fs
}

// parse parses args with flags and positional arguments in any order and
// returns the positional ones; everything after "--" is positional. The int
// is -1 to go on, or the exit code to return at once (help or usage error).
func (c *cli) parse(fs *flag.FlagSet, cmd string, args []string) ([]string, int) {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.help()
				return nil, exitOK
			}
			return nil, c.usageError(cmd, err.Error())
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, tail...), -1
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// context returns the context a command runs under: --timeout if given, else
// defaultTimeout, or no limit when unbounded is true (watch, start --wait).
func (c *cli) context(unbounded bool) (context.Context, context.CancelFunc) {
	switch {
	case c.g.timeout > 0:
		return context.WithTimeout(context.Background(), c.g.timeout)
	case unbounded:
		return context.WithCancel(context.Background())
	default:
		return context.WithTimeout(context.Background(), defaultTimeout)
	}
}

// connect is the start of every command that talks to the daemon: the
// command's context (see context) and a client. On success the caller defers
// done; otherwise code is the exit code to return.
func (c *cli) connect(unbounded bool) (ctx context.Context, cl *client.Client, done func(), code int) {
	ctx, cancel := c.context(unbounded)
	cl, code = c.dial(ctx)
	if code >= 0 {
		cancel()
		return nil, nil, nil, code
	}
	return ctx, cl, func() { cl.Close(); cancel() }, -1
}

// dial connects to the daemon; on failure it reports and returns the exit code.
func (c *cli) dial(ctx context.Context) (*client.Client, int) {
	dctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	cl, err := client.Dial(dctx, c.g.addr)
	if err != nil {
		return nil, c.fail(err)
	}
	return cl, -1
}

// rpcPrefix is the noise gRPC puts in front of a status message.
var rpcPrefix = regexp.MustCompile(`rpc error: code = \w+ desc = `)

// fail prints err as one line on stderr and returns its exit code.
func (c *cli) fail(err error) int {
	code := exitCode(err)
	msg := rpcPrefix.ReplaceAllString(err.Error(), "")
	switch {
	case code == exitUnreachable:
		msg += " (is durabled running? set --addr or DURABLE_ADDR)"
	default:
		if s, ok := status.FromError(err); ok && s.Code() != codes.Unknown && s.Code() != codes.OK {
			msg += " (" + s.Code().String() + ")"
		}
	}
	fmt.Fprintf(c.stderr, "wf: %s\n", msg)
	return code
}

// exitCode maps an error to the exit code scripts see.
func exitCode(err error) int {
	if errors.Is(err, client.ErrUnreachable) {
		return exitUnreachable
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unavailable {
		return exitUnreachable
	}
	return exitFailed
}
