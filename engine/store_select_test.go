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

// testStore is the store setup opens, read from storeEnv by TestMain (not at
// package init, so that go test's cache knows the result depends on it).
var testStore string

func TestMain(m *testing.M) {
	testStore = os.Getenv(storeEnv)
	switch testStore {
	case "", "badger", "postgres":
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want badger or postgres\n", storeEnv, testStore)
		os.Exit(2)
	}
	code := m.Run()
	testpg.Cleanup()
	os.Exit(code)
}

// openStore opens an empty store of the kind storeEnv selects, for one test.
// The caller closes it.
func openStore(t *testing.T) engine.Store {
	t.Helper()
	if testStore == "postgres" {
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
