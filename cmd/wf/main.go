// Command wf is the scriptable command line of a durable daemon: start
// workflows, inspect them, their pending activities and the attempt trail of
// finished ones, find the activities that hurt across workflows, list, group
// and redrive dead letters (one, or many through a redrive operation the
// daemon runs), follow and cancel operations, override an activity type's
// retry policy and timeouts, read the audit log of those actions, follow the
// live change stream and read activity latency stats.
//
// Every command prints aligned tables for people and, with --json, one JSON
// document for scripts. Exit codes: 0 ok, 1 the operation failed (a call the
// daemon refused included), 2 usage error, 3 the daemon is unreachable.
//
// Where the daemon is and how to authenticate to it (address, bearer token,
// TLS) come from the flags of client.Connection, each defaulting to its
// DURABLE_* environment variable, so that one set of variables configures
// wf, wfui and workers alike.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tinyllm/durable/client"
)

// Exit codes that scripts can rely on.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnreachable = 3
)

// defaultTimeout bounds a command unless --timeout says otherwise; watch,
// start --wait and dlq redrive --wait run until done unless --timeout is given.
const defaultTimeout = 30 * time.Second

// getenv is swapped by tests.
var getenv = os.Getenv

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// globals are the flags every command accepts, before or after its name.
type globals struct {
	// conn is where the daemon is and how to authenticate to it.
	conn    client.Connection
	json    bool
	timeout time.Duration
}

func (g *globals) register(fs *flag.FlagSet) {
	g.conn.RegisterFlags(fs)
	fs.BoolVar(&g.json, "json", g.json, "print one JSON document for scripts instead of tables")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up after this long (0: 30s, or no limit for watch, start --wait and dlq redrive --wait)")
}

// globalFlags names the global flags, so that a command's --help can list
// its own flags apart from them.
var globalFlags = func() map[string]bool {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	new(globals).register(fs)
	names := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
	return names
}()

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
		{"describe", "show a workflow, its pending activities and the attempts of finished ones", (*cli).describe},
		{"history", "print the events of a workflow", (*cli).history},
		{"list", "list workflows", (*cli).list},
		{"activities", "list pending activities across workflows by state, attempt and failure", (*cli).activities},
		{"dlq", "list, group and redrive dead-lettered activities, one or by operation", (*cli).dlq},
		{"ops", "list, follow and cancel the operations the daemon runs", (*cli).ops},
		{"policy", "override an activity type's retry policy and timeouts, no redeploy", (*cli).policy},
		{"queues", "task queues: who polls them, backlog and its age, leases per worker", (*cli).queues},
		{"nodes", "the durabled nodes serving the store, and which are alive", (*cli).nodes},
		{"audit", "who redrove, cancelled or overrode what, when, how many and why", (*cli).audit},
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
  --addr HOST:PORT         daemon address (default %s); nodes sharing one
                           database as a comma-separated list, or --addr
                           repeated: a call about a workflow goes to the node
                           its id picks among those that are up, the others
                           round robin
  --token TOKEN            bearer token naming your principal, for a daemon
                           run with --auth; prefer DURABLE_TOKEN, which stays
                           out of the process list
  --token-file FILE        read the token from FILE (a mounted secret)
  --tls                    connect with TLS, verifying the daemon against the
                           system's roots; implied by any --tls-* flag
  --tls-ca FILE            PEM of the CA that signed the daemon's certificate
  --tls-cert FILE          PEM of your client certificate, for a daemon that
  --tls-key FILE           requires one, and its private key
  --tls-server-name NAME   name to verify the daemon's certificate against,
                           when it is not the host in --addr
  --json                   one JSON document for scripts instead of tables
  --timeout D              give up after D (default 30s; watch, start --wait
                           and dlq redrive --wait: no limit)

Environment (flags win):
  DURABLE_ADDR  DURABLE_TOKEN  DURABLE_TOKEN_FILE  DURABLE_TLS=1
  DURABLE_TLS_CA  DURABLE_TLS_CERT  DURABLE_TLS_KEY  DURABLE_TLS_SERVER_NAME

Exit codes: 0 ok, 1 operation failed (refused calls included), 2 usage error
(bad flags, unreadable token or TLS files), 3 daemon unreachable (TLS
handshake failures included).

Examples:
  wf start FlakyDemo --fail-rate 0.5 --activities 3 --wait
  wf describe order-42
  wf activities --state retrying --min-attempt 3
  wf dlq list --activity-type ChargeCard
  wf dlq list --group
  wf dlq redrive --all --failure-type Timeout --dry-run
  wf dlq redrive --all --failure-type Timeout --rate 20 --reason "INC-1234: card API back"
  wf ops describe op-3
  wf ops cancel op-3 --reason "INC-1234: not fixed after all"
  wf policy set ChargeCard --max-attempts 8 --reason "INC-1234: card API flapping"
  wf stats --since 7d --check-policy
  wf audit --since 24h
  wf --addr node1:7345,node2:7345 nodes
  wf --json list --status running | jq -r '.workflows[].workflowId'

  # a remote daemon with TLS and auth: set it up once, then every command
  export DURABLE_ADDR=durable.internal:7345 DURABLE_TLS_CA=/etc/durable/ca.pem
  export DURABLE_TOKEN_FILE=/run/secrets/durable-token
  wf dlq list

Run 'wf COMMAND --help' for the flags and examples of a command.
`

func printMainUsage(w io.Writer) {
	var b strings.Builder
	for _, cmd := range commands() {
		fmt.Fprintf(&b, "  %-11s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintf(w, mainUsage, b.String(), client.DefaultAddr)
}

// run is wf with its arguments and outputs; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	c.g.conn = client.ConnectionFromEnv(getenv)
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
		printOwnFlags(c.stdout, fs)
		fmt.Fprintln(c.stdout, "\nGlobal flags: --addr, --token, --token-file, --tls, --tls-ca, --tls-cert,\n--tls-key, --tls-server-name, --json, --timeout (see 'wf --help').")
	}
	c.g.register(fs)
	return fs
}

// printOwnFlags prints the flags of fs that are not global, as PrintDefaults
// would, under "Flags:"; nothing if there are none.
func printOwnFlags(w io.Writer, fs *flag.FlagSet) {
	own := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		if !globalFlags[f.Name] {
			own.Var(f.Value, f.Name, f.Usage)
			own.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	n := 0
	own.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	own.SetOutput(w)
	own.PrintDefaults()
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
