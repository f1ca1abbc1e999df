package engine_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	badgerstore "github.com/tinyllm/durable/store/badger"
	pgstore "github.com/tinyllm/durable/store/postgres"
)

// storeEnv names the environment variable that picks the store the scenario
// tests run on: "badger" (the default, in memory) or "postgres" (a fresh
// database per test on the test binary's throwaway server).
const storeEnv = "DURABLE_TEST_STORE"

// TestMain checks storeEnv but does not keep it: go test records what a
// test binary reads of its environment only from m.Run on, and a result it
// cached for one store would otherwise be reused for the other. usedStore
// reads it again while the tests run, where the record sees it.
func TestMain(m *testing.M) {
	switch s := os.Getenv(storeEnv); s {
	case "", "badger", "postgres":
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want badger or postgres\n", storeEnv, s)
		os.Exit(2)
	}
	code := m.Run()
	testpg.Cleanup()
	os.Exit(code)
}

// usedStore is the store storeEnv picks: "postgres", or Badger otherwise.
func usedStore() string { return os.Getenv(storeEnv) }

// openStore opens an empty store of the kind storeEnv selects, for one test.
// The caller closes it.
func openStore(t *testing.T) engine.Store {
	t.Helper()
	if usedStore() == "postgres" {
		st, err := pgstore.Open(testpg.Database(t), pgstore.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
