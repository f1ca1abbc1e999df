package testpg

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/tinyllm/durable/internal/pgserver"
)

// Server is a running throwaway PostgreSQL.
type Server struct {
	srv *pgserver.Server
}

// binaries finds initdb and postgres, or skips t (fails it when RequireEnv
// is "require").
func binaries(t testing.TB) pgserver.Binaries {
	t.Helper()
	b, err := pgserver.FindBinaries()
	if err != nil {
		msg := missingMessage(err)
		if os.Getenv(RequireEnv) == "require" {
			t.Fatal(msg + " (" + RequireEnv + "=require)")
		}
		t.Skip(msg)
	}
	return b
}

// missingMessage says what to do when the programs are missing.
func missingMessage(err error) string {
	if errors.Is(err, pgserver.ErrNotInstalled) {
		return "testpg: " + err.Error() + " to run this test"
	}
	return "testpg: " + err.Error()
}

// start runs initdb in a new temporary directory and starts postgres on it
// with the extra settings (name=value).
func start(b pgserver.Binaries, extra ...string) (*Server, error) {
	srv, err := pgserver.Start(pgserver.Options{Binaries: b, Settings: extra})
	if err != nil {
		return nil, err
	}
	return &Server{srv: srv}, nil
}

// Kill SIGKILLs the server and every process of it at once, as a crash or
// a power cut would end it: what it had not flushed is lost, and Restart
// runs crash recovery.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if err := s.srv.Kill(); err != nil {
		t.Fatal(err)
	}
}

// Restart starts the server again on the same data directory, socket and
// port, after Kill or a shutdown.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.srv.Restart(); err != nil {
		t.Fatalf("testpg: %v", err)
	}
}

// Stop shuts the server down and removes its directory. Only the first
// call does anything.
func (s *Server) Stop() { s.srv.Stop() }

// Pid returns the process id of the running postmaster, 0 when none runs:
// its backends and background workers are its children, for a benchmark
// that reads their CPU time from /proc.
func (s *Server) Pid() int { return s.srv.Pid() }

// Logs returns what the server wrote so far.
func (s *Server) Logs() string { return s.srv.Logs() }

// DSN returns the DSN of database db on s, as the superuser.
func (s *Server) DSN(db string) string { return s.srv.DSN(db) }

// exec runs one statement in the postgres database.
func (s *Server) exec(ctx context.Context, sql string) error { return s.srv.Exec(ctx, sql) }
