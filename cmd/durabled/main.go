// Command durabled is the durable daemon: it owns the Badger data directory
// (or, with --store postgres, a PostgreSQL database) and serves the Durable
// gRPC service (plus grpc.health.v1 and reflection) to workers, wf and wfui.
//
//	durabled --listen 127.0.0.1:7345 --data ~/.local/state/durable
//	DURABLE_POSTGRES_DSN=postgres://durable@db/durable durabled --store postgres
//
// It logs "listening addr=HOST:PORT node=NAME" once it accepts connections (with
// --listen 127.0.0.1:0 the port is the one the system picked). SIGTERM or
// SIGINT shuts it down cleanly: health turns NOT_SERVING, long polls are
// answered empty, running calls get a bounded grace period, the store is
// closed and the exit code is 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// config is everything the flags decide.
type config struct {
	listen              string
	node                string
	store               string
	postgresDSN         string
	data                string
	dlqAfterAttempts    int
	seed                int64
	maxPayload          int
	maxWatchers         int
	noSync              bool
	logLevel            slog.Level
	shutdownTimeout     time.Duration
	workflowTaskTimeout time.Duration

	tlsCert, tlsKey, tlsClientCA string
	auth                         string
	insecure                     bool
	reflection                   bool
	metricsListen                string
	auditRetention               time.Duration
	statsRetention               time.Duration
	attemptRetention             time.Duration
	memoryBudget                 int64
	// diskReserve is --disk-reserve; nil means the default rule
	// (badgerstore.DefaultReserve).
	diskReserve *badgerstore.Reserve
}

// Exit codes scripts can rely on.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args and serves until a signal; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "token" {
		return tokenCommand(args[1:], stdout, stderr)
	}
	cfg, err := parseFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "durabled: %v\n", err)
		return exitUsage
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	// What decides who may connect is checked before anything is opened,
	// and a mistake in it is the operator's to fix: said plainly, exit 2.
	tr, err := setupTrust(cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "durabled: %v\n", err)
		return exitUsage
	}
	if err := serve(cfg, tr, logger); err != nil {
		logger.Error("durabled stopped", "err", err)
		return exitError
	}
	return exitOK
}

// defaultDataDir is $XDG_STATE_HOME/durable, or ~/.local/state/durable when
// XDG_STATE_HOME is unset or not absolute (as the XDG spec asks).
func defaultDataDir() string {
	if x := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "durable")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".local", "state", "durable")
}

const usageHeader = `durabled serves durable workflows and activities over gRPC.

Usage:
  durabled [flags]

  durabled token [--name NAME --role ROLE]   print a new bearer token and its hash

It owns one data directory (a Badger database) and must be its only user.
With --store postgres it keeps its state in a PostgreSQL database instead
(--postgres-dsn or $DURABLE_POSTGRES_DSN; the schema is created and
upgraded at start), and --data, --memory-budget, --disk-reserve and
--no-sync do not apply. Any number of durabled nodes may serve one
database, each under a --node name of its own; any node answers any call.
A name that a node heard from in the last 5s holds is waited for until that
node's heartbeat is stale (a restart right after a crash), and refused with
exit 1 if it is still alive then. Give clients
every node (--addr node1:7345,node2:7345) or a load balancer in front of
them; 'wf nodes' lists the nodes and which are alive.
Workers, wf and wfui connect to --listen. SIGTERM or SIGINT shuts it down
cleanly (exit code 0): health turns NOT_SERVING, waiting long polls are
answered empty, running calls finish within --shutdown-timeout, and the data
directory is closed so the next start reopens it at once.

Running it for a team: --auth names the principals (workers, readers,
operators) and how each authenticates (a bearer token's hash, or a client
certificate's common name); --tls-cert and --tls-key serve TLS, and
--tls-client-ca requires client certificates. Without --auth it serves only
on loopback, where every call runs as the operator "local". SIGHUP re-reads
the auth file; certificate files are re-read when they change. Every
operator action is written to an audit log (wf audit). Activities that
finish are kept with their attempt trail for --attempt-retention (wf
describe).

A full disk is a state, not a crash: below --disk-reserve free on the data
volume, calls that change state are refused with ResourceExhausted (reads,
Watch and polls go on) until space is back; started on a full disk, durabled
opens its store read-only and needs a restart once space is freed.

Memory: --memory-budget is split by a fixed rule. A quarter bounds the
pages of the store's logs kept resident (beyond it durabled asks the
kernel to reclaim them; they are read back from disk when needed). The
other three quarters are the Go heap's soft limit: when the heap nears it
the garbage collector works harder, and out of it the store's two
memtables take a sixteenth of the budget each (at most 64MiB each), its
block cache a sixteenth and its index cache a thirty-second. Not bounded:
requests in flight and their payloads, gRPC buffers, and the in-memory
queues, timers and watchers, which grow with the number of waiting
activities; if these need more, the heap grows past the limit rather
than fail (GOMEMLIMIT, if set, takes the place of the soft limit). While
they fit, the resident set stays under the budget plus a quarter plus
64MiB (384MiB for the default 256MiB); 5,000 activities with 64KiB
inputs peak near 300MB and settle near 100MB with the default.

Flags:
`

func parseFlags(args []string, stdout, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("durabled", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:7345",
		"`address` to serve gRPC on; port 0 picks a free port (the log line \"listening addr=...\" names it)")
	fs.StringVar(&cfg.node, "node", "",
		"this daemon's `name` among the nodes of its store, in the \"listening\" log line, the metrics (durable_node_info) and 'wf nodes': "+
			"up to 128 ASCII letters, digits and . - _ : @. The default, HOSTNAME-PID, is unique among the daemons running; "+
			"give a stable name (a pod's, say) to keep one across restarts (default HOSTNAME-PID)")
	fs.StringVar(&cfg.store, "store", storeBadger,
		"where the state is kept: badger (a data directory of its own, --data) or postgres (a PostgreSQL database, --postgres-dsn, that several nodes may share)")
	fs.StringVar(&cfg.postgresDSN, "postgres-dsn", "",
		"with --store postgres, the `DSN` of the database (postgres://user@host/db or key=value); defaults to $"+postgresDSNEnv+", which keeps a password out of ps")
	fs.StringVar(&cfg.data, "data", defaultDataDir(),
		"data `directory`, created if missing; defaults to $XDG_STATE_HOME/durable, else ~/.local/state/durable")
	fs.IntVar(&cfg.dlqAfterAttempts, "dlq-after-attempts", 5,
		"dead-letter an activity when this attempt fails, for retry policies that leave max_attempts 0")
	fs.Int64Var(&cfg.seed, "seed", 0,
		"seed of the retry jitter generator; 0 seeds from the clock, any other value makes jitter repeatable")
	fs.IntVar(&cfg.maxPayload, "max-payload", server.DefaultMaxPayload,
		"largest single payload in `bytes` (input, result, heartbeat or failure details); larger ones are rejected as InvalidArgument")
	fs.BoolVar(&cfg.noSync, "no-sync", false,
		"relaxed durability, a trade of safety for speed: acknowledge without fsync, so an acknowledged change survives a crash of durabled but may be lost if the machine crashes or loses power")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo,
		"least severe log `level` written to stderr: debug, info, warn or error")
	fs.DurationVar(&cfg.workflowTaskTimeout, "workflow-task-timeout", 10*time.Second,
		"how long a worker may hold a workflow task before it is handed to another; a worker that dies holding one stalls its workflow this long")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second,
		"on SIGTERM, how long running calls may take to finish before they are cut off")
	fs.StringVar(&cfg.tlsCert, "tls-cert", "",
		"serve TLS with this PEM certificate `file` (with --tls-key); re-read when it changes")
	fs.StringVar(&cfg.tlsKey, "tls-key", "",
		"PEM private key `file` of --tls-cert; re-read when it changes")
	fs.StringVar(&cfg.tlsClientCA, "tls-client-ca", "",
		"require client certificates signed by the CAs in this PEM `file` (mTLS); needs --tls-cert")
	fs.StringVar(&cfg.auth, "auth", "",
		"auth `file` (JSON) of principals, their roles and credentials; re-read on SIGHUP. Without it durabled serves loopback only")
	fs.BoolVar(&cfg.insecure, "insecure", false,
		"serve a non-loopback --listen without --auth: anyone who can reach the port may read every payload and act as an operator")
	fs.BoolVar(&cfg.reflection, "reflection", false,
		"serve gRPC reflection (for grpcurl and the like); with --auth, to any authenticated principal")
	fs.StringVar(&cfg.metricsListen, "metrics-listen", "",
		"serve Prometheus metrics at /metrics and a health check at /healthz on this `address` (plain HTTP); off when empty")
	cfg.auditRetention = engine.DefaultAuditRetention
	fs.Var(days{&cfg.auditRetention}, "audit-retention",
		"keep audit records this `long` (a duration such as 2160h, or days such as 90d)")
	cfg.statsRetention = engine.DefaultStatsRetention
	fs.Var(days{&cfg.statsRetention}, "stats-retention",
		"keep attempt durations by the hour this `long`, the longest window 'wf stats --since' can ask for; older hours count only in the all-time figures")
	cfg.attemptRetention = engine.DefaultAttemptRetention
	fs.Var(days{&cfg.attemptRetention}, "attempt-retention",
		"keep finished activities with every attempt and its failure this `long` after they finish (a duration such as 36h, or days such as 7d)")
	fs.IntVar(&cfg.maxWatchers, "max-watchers", engine.DefaultMaxWatchers,
		"most Watch streams (consoles, 'wf watch', SDK watchers) open at once; one more is refused with ResourceExhausted. Each may hold 4,096 unread changes; a watcher further behind ends with Aborted and resubscribes")
	fs.Var(reserveFlag{&cfg.diskReserve}, "disk-reserve",
		"free space to keep on the data volume, a `SIZE|PERCENT` such as 512MiB or 5%: below it, changes of state are refused until space is back. "+
			"Default 256MiB, or twice the largest file the store maps when that is more; a lower value risks a crash (SIGBUS) when the disk fills")
	cfg.memoryBudget = badgerstore.DefaultMemoryBudget
	fs.Var(byteSize{&cfg.memoryBudget}, "memory-budget",
		"memory `size` (256MiB, 1GiB) for the store's memtables and caches, its resident log pages and the Go heap's soft limit; "+
			"requests in flight, gRPC buffers and the queues of waiting tasks may take the heap beyond it (see Memory above)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprint(w, usageHeader)
		fs.PrintDefaults()
	}
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fs.SetOutput(stdout)
			break
		}
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q; see --help", strings.Join(fs.Args(), " "))
	}
	if err := checkStoreFlags(fs, &cfg); err != nil {
		return config{}, err
	}
	if !flagGiven(fs, "node") {
		cfg.node = server.DefaultNodeName()
	}
	if err := server.CheckNodeName(cfg.node); err != nil {
		return config{}, fmt.Errorf("--node: the name %w", err)
	}
	switch {
	case cfg.store == storeBadger && cfg.data == "":
		return config{}, errors.New("--data is required: no home directory to default to")
	case cfg.dlqAfterAttempts < 1 || cfg.dlqAfterAttempts > 10000:
		return config{}, fmt.Errorf("--dlq-after-attempts must be in [1, 10000], got %d", cfg.dlqAfterAttempts)
	case cfg.maxWatchers < 1 || cfg.maxWatchers > 100000:
		return config{}, fmt.Errorf("--max-watchers must be in [1, 100000], got %d", cfg.maxWatchers)
	case cfg.maxPayload < 1 || cfg.maxPayload > 512<<20:
		return config{}, fmt.Errorf("--max-payload must be in [1, %d] bytes, got %d", 512<<20, cfg.maxPayload)
	case cfg.workflowTaskTimeout < 100*time.Millisecond || cfg.workflowTaskTimeout > 24*time.Hour:
		return config{}, fmt.Errorf("--workflow-task-timeout must be in [100ms, 24h], got %s", cfg.workflowTaskTimeout)
	case cfg.shutdownTimeout <= 0:
		return config{}, fmt.Errorf("--shutdown-timeout must be > 0, got %s", cfg.shutdownTimeout)
	case (cfg.tlsCert == "") != (cfg.tlsKey == ""):
		return config{}, errors.New("--tls-cert and --tls-key go together: give both, or neither for plaintext")
	case cfg.tlsClientCA != "" && cfg.tlsCert == "":
		return config{}, errors.New("--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked in a TLS handshake")
	case cfg.auditRetention < time.Hour:
		return config{}, fmt.Errorf("--audit-retention must be at least 1h, got %s", cfg.auditRetention)
	case cfg.statsRetention < time.Hour:
		return config{}, fmt.Errorf("--stats-retention must be at least 1h, got %s", cfg.statsRetention)
	case cfg.attemptRetention < time.Minute:
		return config{}, fmt.Errorf("--attempt-retention must be at least 1m, got %s", cfg.attemptRetention)
	case cfg.memoryBudget < badgerstore.MinMemoryBudget:
		return config{}, fmt.Errorf("--memory-budget %s is too small to run with: give at least %s (the default is %s)",
			badgerstore.FormatSize(uint64(cfg.memoryBudget)), badgerstore.FormatSize(uint64(badgerstore.MinMemoryBudget)),
			badgerstore.FormatSize(uint64(badgerstore.DefaultMemoryBudget)))
	}
	return cfg, nil
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// badgerOnly are the flags that mean something only for the Badger store.
var badgerOnly = []string{"data", "memory-budget", "disk-reserve", "no-sync"}

// checkStoreFlags checks --store against the flags given with it and fills
// in the DSN from the environment.
func checkStoreFlags(fs *flag.FlagSet, cfg *config) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch cfg.store {
	case storeBadger:
		if set["postgres-dsn"] {
			return errors.New("--postgres-dsn needs --store postgres")
		}
	case storePostgres:
		if cfg.postgresDSN == "" {
			cfg.postgresDSN = os.Getenv(postgresDSNEnv)
		}
		if cfg.postgresDSN == "" {
			return fmt.Errorf("--store postgres needs --postgres-dsn DSN or $%s", postgresDSNEnv)
		}
		if _, err := pgx.ParseConfig(cfg.postgresDSN); err != nil {
			return fmt.Errorf("--postgres-dsn: %w", err)
		}
		var given []string
		for _, name := range badgerOnly {
			if set[name] {
				given = append(given, "--"+name)
			}
		}
		if len(given) > 0 {
			return fmt.Errorf("%s: only for --store badger; PostgreSQL keeps the data, its disk and its memory itself (and commits durably)", strings.Join(given, ", "))
		}
	default:
		return fmt.Errorf("--store %q: want badger or postgres", cfg.store)
	}
	return nil
}

// reserveFlag is --disk-reserve: a size or a share of the volume.
type reserveFlag struct{ r **badgerstore.Reserve }

func (f reserveFlag) String() string {
	if f.r == nil || *f.r == nil {
		return ""
	}
	return (*f.r).String()
}

func (f reserveFlag) Set(s string) error {
	r, err := badgerstore.ParseReserve(s)
	if err != nil {
		return err
	}
	*f.r = &r
	return nil
}

// days is a duration flag that also takes whole days ("90d").
type days struct{ d *time.Duration }

func (f days) String() string {
	if f.d == nil {
		return ""
	}
	if *f.d%(24*time.Hour) == 0 {
		return strconv.Itoa(int(*f.d/(24*time.Hour))) + "d"
	}
	return f.d.String()
}

func (f days) Set(s string) error {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 {
			return fmt.Errorf("want a duration such as 2160h or a number of days such as 90d, got %q", s)
		}
		*f.d = time.Duration(v) * 24 * time.Hour
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 2160h or a number of days such as 90d, got %q", s)
	}
	*f.d = d
	return nil
}
