package pgserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestFindBinaries_MissingSaysWhichPackageToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findBinaries(filepath.Join(t.TempDir(), "*", "bin"))
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("found PostgreSQL binaries in an empty directory and PATH: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "apt-get install postgresql") || !strings.Contains(msg, "initdb") {
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
	if want := filepath.Join(root, "15", "bin", "initdb"); b.Initdb != want {
		t.Errorf("initdb = %s, want %s", b.Initdb, want)
	}
}

// TestStart_ServesADatabaseUntilStopRemovesIt: a started server creates
// and serves databases, and Stop ends it and removes its directory.
func TestStart_ServesADatabaseUntilStopRemovesIt(t *testing.T) {
	t.Parallel()
	if _, err := FindBinaries(); err != nil {
		if os.Getenv("DURABLE_TEST_POSTGRES") == "require" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	ctx := context.Background()
	dsn, err := s.CreateDatabase(ctx, "served")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var fsync string
	err = conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync)
	conn.Close(ctx)
	if err != nil || fsync != "on" {
		t.Errorf("fsync = %q (%v), want on", fsync, err)
	}
	if err := s.DropDatabase(ctx, "served"); err != nil {
		t.Error(err)
	}
	s.Stop()
	if !s.Exited() {
		t.Error("the server still runs after Stop")
	}
	if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
		t.Errorf("server directory after Stop: %v, want it removed", err)
	}
}
