package testpg

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
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
		if _, err := os.Stat(s.dir); err != nil {
			t.Fatalf("server directory while running: %v", err)
		}
	})
	if s == nil {
		t.Skip("no server started")
	}
	if !s.waitExit(0) {
		t.Error("the server still runs after its test ended")
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("server directory after cleanup: %v, want it removed", err)
	}
}

func TestFindBinaries_MissingSaysWhichPackageToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findBinaries(filepath.Join(t.TempDir(), "*", "bin"))
	if err == nil {
		t.Fatal("found PostgreSQL binaries in an empty directory and PATH")
	}
	if msg := missingMessage(err); !strings.Contains(msg, "apt-get install postgresql") || !strings.Contains(msg, "initdb") {
		t.Errorf("message %q does not name the programs and the package", msg)
	}
}

func TestFindBinaries_PrefersTheNewestDebianVersion(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9", "15", "13"} {
		dir := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, prog := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(dir, prog), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := findBinaries(filepath.Join(root, "*", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "15", "bin", "initdb"); b.initdb != want {
		t.Errorf("initdb = %s, want %s", b.initdb, want)
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
