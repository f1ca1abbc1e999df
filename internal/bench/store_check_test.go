package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/internal/testpg"
)

func TestTarget_CheckRefusesWhatCannotRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		t         target
		profile   bool
		nodeFlag  bool
		wantError string // "" when it runs
	}{
		{name: "BadgerInTheTestBinary", t: target{store: storeBadger}},
		{name: "BadgerOneProcess", t: target{store: storeBadger, nodes: 1}},
		{name: "PostgresInTheTestBinary", t: target{store: storePostgres}, profile: true},
		{name: "PostgresOneProcess", t: target{store: storePostgres, nodes: 1}},
		{name: "PostgresThreeNodes", t: target{store: storePostgres, nodes: 3}, nodeFlag: true},
		{name: "PostgresThreeNodesWithoutNodeFlag", t: target{store: storePostgres, nodes: 3}, wantError: "no --node flag"},
		{name: "BadgerThreeNodes", t: target{store: storeBadger, nodes: 3}, nodeFlag: true, wantError: "belongs to one process"},
		{name: "UnknownStore", t: target{store: "sqlite"}, wantError: `-bench.store="sqlite"`},
		{name: "NegativeNodes", t: target{store: storeBadger, nodes: -1}, wantError: "-bench.nodes=-1"},
		{name: "ProfileOnBadger", t: target{store: storeBadger}, profile: true, wantError: "needs -bench.store=postgres"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.t.check(tc.profile, func() bool { return tc.nodeFlag })
			switch {
			case tc.wantError == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantError != "" && (err == nil || !strings.Contains(err.Error(), tc.wantError)):
				t.Fatalf("error %v, want one saying %q", err, tc.wantError)
			}
		})
	}
}

// The database's CPU counts the backends of connections that are still open
// and of those that have closed, so a benchmark's db-cpu does not lose the
// work of a backend that exits during the run.
func TestDatabaseCPUCountsOpenAndClosedBackends(t *testing.T) {
	srv := testpg.New(t)
	db := &pgDatabase{server: srv, dsn: srv.DSN("postgres")}
	ctx := context.Background()
	connect := func() (*pgx.Conn, int) {
		conn, err := pgx.Connect(ctx, db.dsn)
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return conn, pid
	}
	burn := func(conn *pgx.Conn) {
		if _, err := conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 3000000)"); err != nil {
			t.Fatal(err)
		}
	}
	open, openPid := connect()
	defer open.Close(ctx)
	closing, _ := connect()

	before := db.cpu()
	burn(open)
	burn(closing)
	closing.Close(ctx)
	one := procCPU(openPid) // what one count cost, about
	if one == 0 {
		t.Fatal("a backend that counted 3 million rows used no CPU, or /proc could not be read")
	}
	// The closed backend's CPU moves to the postmaster's children's times
	// when the postmaster reaps it, a moment after it exits; until then it
	// is counted as a process of its own.
	var used time.Duration
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if used = db.cpu() - before; used >= one*3/2 {
			break
		}
	}
	if used < one*3/2 {
		t.Fatalf("the server's CPU grew by %v for two counts that each cost about %v", used, one)
	}
	t.Logf("two counts of 3 million rows: %v of server CPU, one about %v", used, one)
}
