// Package testpg runs throwaway PostgreSQL servers for tests, with
// internal/pgserver: initdb in a temporary directory, a server listening
// only on a unix socket in a directory of its own (no TCP, so it never
// collides with another server or test), fsync on like a real deployment,
// and everything stopped and removed when the test ends.
//
// The binaries come from Debian's postgresql package (/usr/lib/postgresql/*/bin,
// the newest version first) or from PATH. When they are missing, tests skip
// and say which package to install; with DURABLE_TEST_POSTGRES=require set
// (CI sets it) they fail instead, so a missing server can never pass
// unnoticed. initdb and postgres refuse to run as root: as root, the server
// runs as the unprivileged postgres user the package creates.
//
// Database gives a test a fresh database on one server shared by the test
// binary (initdb costs about a second; a CREATE DATABASE much less); New
// gives a test a server of its own, for tests that stop or kill it; a Lazy
// is a shared server a test binary starts with settings of its own (the
// benchmarks'). Packages that call Database call Cleanup from TestMain.
// Production code must not import this package.
package testpg

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

// RequireEnv names the environment variable that turns a skip for missing
// binaries into a failure when it is "require".
const RequireEnv = "DURABLE_TEST_POSTGRES"

// The server Database shares within a test binary, started on first use and
// stopped by Cleanup.
var (
	shared    Lazy
	databases atomic.Int64
)

// Database creates an empty database on the test binary's shared server and
// returns a DSN for github.com/jackc/pgx/v5 (pgx.Connect, pgxpool.New). The
// database is dropped when t ends; the server stays for the next test until
// Cleanup.
func Database(t testing.TB) (dsn string) {
	t.Helper()
	return shared.Get(t).CreateDatabase(t)
}

// Cleanup stops the shared server Database started, if any, and removes its
// directory. Call it from TestMain after m.Run.
func Cleanup() { shared.Stop() }

// Lazy is a server a test binary shares among its tests: started at the
// first Get, stopped by Stop (from TestMain). A server that failed to start
// is not tried again until Stop. The zero Lazy is ready to use.
type Lazy struct {
	mu  sync.Mutex
	s   *Server
	err error
}

// Get returns the server, starting it with settings (as Start takes them)
// if it is not running; settings are ignored once it runs. Missing
// binaries skip tb; a server that does not start fails it.
func (l *Lazy) Get(tb testing.TB, settings ...string) *Server {
	tb.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s == nil && l.err == nil {
		l.s, l.err = start(binaries(tb), settings...)
	}
	if l.err != nil {
		tb.Fatalf("testpg: %v", l.err)
	}
	return l.s
}

// Stop stops the server, if it runs, and removes its directory.
func (l *Lazy) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s != nil {
		l.s.Stop()
		l.s = nil
	}
	l.err = nil
}

// New starts a server of the test's own, stopped and removed when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := Start(t)
	t.Cleanup(s.Stop)
	return s
}

// Start starts a server that runs until Stop, for a test binary that keeps
// one server of its own across tests, such as a benchmark that wants
// statistics Database's shared server does not collect. settings are
// passed to postgres as -c name=value after the package's own, so they
// override them (shared_preload_libraries=pg_stat_statements, say). tb is
// used only while the server starts: a failure to start fails it, missing
// binaries skip it.
func Start(tb testing.TB, settings ...string) *Server {
	tb.Helper()
	s, err := start(binaries(tb), settings...)
	if err != nil {
		tb.Fatalf("testpg: %v", err)
	}
	return s
}

// CreateDatabase creates an empty database on s, dropped when t ends, and
// returns its DSN.
func (s *Server) CreateDatabase(t testing.TB) (dsn string) {
	t.Helper()
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), databases.Add(1))
	if err := s.exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testpg: %v", err)
	}
	t.Cleanup(func() {
		// WITH (FORCE) ends the connections a failed test left open.
		if err := s.exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("testpg: %v", err)
		}
	})
	return s.DSN(name)
}
