package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/internal/testpg"
)

// storeEnv names the environment variable that picks the daemon's store:
// "badger" (the default, a directory per test) or "postgres" (a fresh
// database per test on the test binary's throwaway server).
const storeEnv = "DURABLE_TEST_STORE"

// usedStore is the store storeEnv picks. It is read while the tests run,
// not kept from TestMain: go test records what a test binary reads of its
// environment only from m.Run on, and a result it cached for one store
// would otherwise be reused for the other.
func usedStore() string { return os.Getenv(storeEnv) }

// Binaries built once by TestMain. The children are built without -race:
// only the harness and the sink in the test process need it.
var (
	durabledBin string
	demoBin     string
)

// TestMain builds durabled and the demo binary (whose `worker` subcommand is
// the demo worker) into a temporary directory. DURABLED, if set, names a
// durabled binary to use instead of building one.
func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "harness-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		switch s := os.Getenv(storeEnv); s {
		case "", "badger", "postgres":
		default:
			fmt.Fprintf(os.Stderr, "%s=%q: want badger or postgres\n", storeEnv, s)
			return 2
		}
		defer testpg.Cleanup()
		durabledBin = os.Getenv("DURABLED")
		if durabledBin == "" {
			if durabledBin, err = Build(ctx, dir, "durabled", DurabledPackage); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		if demoBin, err = Build(ctx, dir, "demo", "github.com/tinyllm/durable/demo"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

// setup starts a Cluster for t and a client of its daemon; both are closed
// when t ends. On failure the children's logs are printed.
func setup(t *testing.T) (*Cluster, *client.Client) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := Options{Dir: dir, Durabled: durabledBin, Worker: []string{demoBin, "worker"}}
	if usedStore() == "postgres" {
		opts.PostgresDSN = testpg.Database(t)
	}
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	closeWithLogs(t, c, dir)
	cl, err := client.Dial(ctx, c.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return c, cl
}

// waitFor polls cond every few milliseconds until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closeWithLogs closes the cluster started in dir when t ends, printing the
// tail of each process's log first if t failed.
func closeWithLogs(t *testing.T, c *Cluster, dir string) {
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
			for _, l := range logs {
				p := &Proc{Name: filepath.Base(l), LogPath: l}
				t.Logf("--- %s (tail)\n%s", p.Name, p.Tail(30))
			}
		}
	})
}
