package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/internal/proccpu"
	"github.com/tinyllm/durable/internal/testdaemon"
	"github.com/tinyllm/durable/internal/testpg"
)

// The stores and node counts the throughput benchmarks run on. Without
// flags they run as they always have: one engine on an on-disk Badger store
// inside the test binary.
var (
	benchStore = flag.String("bench.store", storeBadger,
		"store of the throughput benchmarks' daemon: badger (on disk, fsync on) or postgres (a throwaway PostgreSQL server, fsync on, a database per benchmark)")
	benchNodes = flag.Int("bench.nodes", 0,
		"0: the daemon runs inside the test binary; N ≥ 1: N durabled processes on the store (more than one needs postgres and a durabled with --node), the worker's pollers and the driver's workflows spread over them round robin")
	benchRoute = flag.Bool("bench.route", false,
		"with several nodes: the driver starts each workflow, and the worker reports each of its tasks, through the node its workflow id picks (nodeFor; SDKThroughput's clients balance as the SDK does for a list of addresses), so that one node writes each workflow's record; without it, workflows start round robin and a report goes to the node that handed the task out (SDKThroughput: every call round robin)")
	benchPGProfile = flag.Bool("bench.pgprofile", false,
		"with -bench.store=postgres: load pg_stat_statements, time WAL writes and syncs, sample the backends' wait events every 5ms, and log statements, waits and WAL per activity")
	benchPGVacuum = flag.Bool("bench.pgvacuum", false,
		"with -bench.store=postgres: VACUUM ANALYZE the database, its tables empty, just before the timed part, as autovacuum does on a quiet deployment; the plans made after see tables with no pages (a burst after a quiet spell)")
)

const (
	storeBadger   = "badger"
	storePostgres = "postgres"
)

// target is where the flags say a throughput benchmark runs.
type target struct {
	store string
	nodes int // 0: in the test binary
}

// flagTarget reads and checks the flags.
func flagTarget(b *testing.B) target {
	t := target{store: *benchStore, nodes: *benchNodes}
	if err := t.check(*benchPGProfile, func() bool { return durabledHasNodeFlag(b) }); err != nil {
		b.Fatal(err)
	}
	if *benchRoute && t.nodes < 2 {
		b.Fatal("-bench.route needs -bench.nodes of 2 or more")
	}
	if *benchPGVacuum && t.store != storePostgres {
		b.Fatal("-bench.pgvacuum needs -bench.store=postgres")
	}
	return t
}

// check says what is wrong with t, if anything; hasNodeFlag reports
// whether durabled can run as one of several nodes (asked only when t has
// several).
func (t target) check(pgProfile bool, hasNodeFlag func() bool) error {
	switch {
	case t.store != storeBadger && t.store != storePostgres:
		return fmt.Errorf("-bench.store=%q: want %s or %s", t.store, storeBadger, storePostgres)
	case t.nodes < 0:
		return fmt.Errorf("-bench.nodes=%d: want 0 (the daemon in the test binary) or a number of durabled processes", t.nodes)
	case t.nodes > 1 && t.store == storeBadger:
		return fmt.Errorf("-bench.nodes=%d with -bench.store=badger: a Badger data directory belongs to one process; several nodes need -bench.store=postgres", t.nodes)
	case t.nodes > 1 && !hasNodeFlag():
		return fmt.Errorf("-bench.nodes=%d: this durabled has no --node flag, so it serves a database alone (a second node is refused); "+
			"several nodes need the version that shares queues, timers and polls through the database", t.nodes)
	case pgProfile && t.store != storePostgres:
		return errors.New("-bench.pgprofile needs -bench.store=postgres")
	}
	return nil
}

// String names the target in logs.
func (t target) String() string {
	if t.nodes == 0 {
		return t.store + ", in the test binary"
	}
	return fmt.Sprintf("%s, %d durabled", t.store, t.nodes)
}

var (
	nodeFlagOnce sync.Once
	nodeFlag     bool
)

// durabledHasNodeFlag reports whether the durabled of this checkout names
// its node with --node, the flag of the version that runs several nodes on
// one database.
func durabledHasNodeFlag(b *testing.B) bool {
	nodeFlagOnce.Do(func() {
		out, _ := exec.Command(testdaemon.Binary(b), "--help").CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) > 0 && (f[0] == "-node" || f[0] == "--node") {
				nodeFlag = true
			}
		}
	})
	return nodeFlag
}

// The PostgreSQL server of the test binary, started on first use and
// stopped by TestMain. It is the benchmarks' own rather than testpg's
// shared one so that -bench.pgprofile can start it with the statistics
// it reads.
var pgServer testpg.Lazy

func benchPostgres(b *testing.B) *testpg.Server {
	var settings []string
	if *benchPGProfile {
		settings = []string{"shared_preload_libraries=pg_stat_statements", "track_wal_io_timing=on", "pg_stat_statements.track_utility=on"}
	}
	return pgServer.Get(b, settings...)
}

// startTarget starts the daemon (or the nodes) of a throughput benchmark,
// stopped when b ends.
func startTarget(b *testing.B, t target, s setup) *daemon {
	if t.nodes > 0 && (s.secure || s.metrics) {
		b.Skip("TLS, auth and metrics variants run with the daemon in the test binary only (-bench.nodes=0)")
	}
	var pg *pgDatabase
	if t.store == storePostgres {
		srv := benchPostgres(b)
		pg = &pgDatabase{server: srv, dsn: srv.CreateDatabase(b)}
		s.dsn = pg.dsn
	}
	if t.nodes == 0 {
		d, stop := openDaemon(b, b.TempDir(), s)
		d.pg, d.stop = pg, sync.OnceFunc(stop)
		b.Cleanup(d.stop)
		return d
	}
	d := &daemon{pg: pg, tokens: map[string]string{}}
	var procs []*testdaemon.Process
	for i := range t.nodes {
		var p *testdaemon.Process
		switch t.store {
		case storeBadger:
			p = testdaemon.Exec(b, b.TempDir())
		case storePostgres:
			args := []string{"--store", "postgres", "--postgres-dsn", pg.dsn}
			if t.nodes > 1 {
				args = append(args, "--node", fmt.Sprintf("bench-%d", i+1))
			}
			p = testdaemon.Exec(b, "", args...)
		}
		procs = append(procs, p)
		d.addrs = append(d.addrs, p.Addr)
		d.pids = append(d.pids, p.Pid())
	}
	d.addr = d.addrs[0]
	b.Cleanup(func() {
		if b.Failed() {
			for _, p := range procs {
				for _, l := range strings.Split(p.Logs(), "\n") {
					if strings.Contains(l, "level=ERROR") || strings.Contains(l, "level=WARN") {
						b.Log(l)
					}
				}
			}
		}
	})
	d.stop = sync.OnceFunc(func() {
		for _, p := range procs {
			p.Kill()
		}
	})
	return d
}

// pgDatabase is the PostgreSQL database of one benchmark.
type pgDatabase struct {
	server *testpg.Server
	dsn    string
}

// dbName is the database's name, from its DSN.
func (p *pgDatabase) dbName() string {
	for _, f := range strings.Fields(p.dsn) {
		if v, ok := strings.CutPrefix(f, "dbname="); ok {
			return v
		}
	}
	return ""
}

// vacuum runs VACUUM ANALYZE on the database: its tables' statistics then
// say what they hold, which before the timed part is nothing, and the
// plans that use them are made again at their next run.
func (p *pgDatabase) vacuum(tb testing.TB) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		tb.Fatal(err)
	}
}

// cpu is the CPU time the server's processes have used so far: the
// postmaster and its children (backends, background workers), read from
// /proc, plus the postmaster's cutime and cstime, which hold the CPU of the
// children it has reaped (backends of connections that closed, autovacuum
// workers). Zero without /proc.
func (p *pgDatabase) cpu() time.Duration {
	if p == nil {
		return 0
	}
	return proccpu.Tree(p.server.Pid())
}
