package testpg

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/internal/pgserver"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

func TestDatabase_IsEmptyWritableAndDurable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var tables int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("a new database has %d tables, want none", tables)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	if fsync != "on" {
		t.Errorf("fsync = %s, want on", fsync)
	}
}

func TestDatabase_EachTestGetsItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := Database(t), Database(t)
	if a == b {
		t.Fatalf("two calls returned the same database %q", a)
	}
	for _, dsn := range []string{a, b} {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE only_mine (v int)"); err != nil {
			t.Errorf("%s: %v", dsn, err)
		}
		conn.Close(ctx)
	}
}

func TestNew_StopsAndRemovesItsDirectoryAtCleanup(t *testing.T) {
	t.Parallel()
	var s *Server
	t.Run("Uses", func(t *testing.T) {
		s = New(t)
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, s.CreateDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		if _, err := os.Stat(s.srv.Dir()); err != nil {
			t.Fatalf("server directory while running: %v", err)
		}
	})
	if s == nil {
		t.Skip("no server started")
	}
	if !s.srv.Exited() {
		t.Error("the server still runs after its test ended")
	}
	if _, err := os.Stat(s.srv.Dir()); !os.IsNotExist(err) {
		t.Errorf("server directory after cleanup: %v, want it removed", err)
	}
}

func TestMissingBinaries_SayWhichPackageToInstall(t *testing.T) {
	t.Parallel()
	msg := missingMessage(pgserver.ErrNotInstalled)
	for _, want := range []string{"apt-get install postgresql", "initdb", "to run this test"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
}

// TestServer_KillLosesNoCommittedTransaction: with fsync on, what a commit
// acknowledged survives a SIGKILL of every server process.
func TestServer_KillLosesNoCommittedTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(t)
	dsn := s.CreateDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE acked (n int)"); err != nil {
		t.Fatal(err)
	}
	for n := range 20 {
		if _, err := conn.Exec(ctx, "INSERT INTO acked VALUES ($1)", n); err != nil {
			t.Fatal(err)
		}
	}
	s.Kill(t)
	if _, err := conn.Exec(ctx, "SELECT 1"); err == nil {
		t.Error("a connection to a killed server still answers")
	}
	conn.Close(ctx)
	s.Restart(t)
	conn, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM acked").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 20 {
		t.Errorf("%d rows after a crash, want the 20 committed", rows)
	}
}
