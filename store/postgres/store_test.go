package postgres

import (
	"os"
	"testing"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	"github.com/tinyllm/durable/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testpg.Cleanup()
	os.Exit(code)
}

// open opens a store on dsn, closed when the test ends.
func open(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(dsn, Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStoreConformance runs the store suite on a database of its own per
// case, reopened (a new connection pool on the same database) at the end
// of every write phase.
func TestStoreConformance(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) storetest.Opened {
			dsn := testpg.Database(t)
			return storetest.Opened{
				Store: open(t, dsn),
				ReopenFunc: func(t *testing.T, s engine.Store) engine.Store {
					if err := s.Close(); err != nil {
						t.Fatalf("close: %v", err)
					}
					return open(t, dsn)
				},
				MaxIDLen: maxPartLen, MaxRecordSize: maxRecordSize,
			}
		})
	})
}
