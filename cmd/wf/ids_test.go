package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// TestIdsFromAnOlderStoreShowEscaped: a store written before ids had to be
// plain may hold a workflow whose id carries a right-to-left override and
// whose queue and type carry zero-width characters; wf shows each of them
// escaped, never raw, in every table and line that names them.
func TestIdsFromAnOlderStoreShowEscaped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const id, typ, queue = "invoice-\u202Efdp.exe", "Pay\u200Bment", "q\uFEFF"
	dataDir := filepath.Join(t.TempDir(), "data")
	st, err := badgerstore.Open(dataDir, badgerstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(st, engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: typ, TaskQueue: queue}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	addr := testdaemon.Exec(t, dataDir).Addr

	for _, args := range [][]string{{"list"}, {"describe", id}, {"history", id}, {"watch", "--snapshot"}} {
		r := wf(t, append([]string{"--addr", addr}, args...)...).wantCode(t, exitOK)
		if strings.ContainsAny(r.stdout, "\u202E\u200B\uFEFF") {
			t.Errorf("wf %s printed an invisible character raw:\n%s", args[0], r.stdout)
		}
		want := map[string][]string{
			"list":     {`invoice-\u202efdp.exe`, `Pay\u200bment`},
			"describe": {`invoice-\u202efdp.exe`, `Pay\u200bment`, `q\ufeff`},
			"history":  {`type=Pay\u200bment`, `queue=q\ufeff`},
			"watch":    {`workflow invoice-\u202efdp.exe Pay\u200bment`},
		}[args[0]]
		mustContain(t, r.stdout, want...)
	}
	// Scripts get the id as it is stored.
	r := wf(t, "--addr", addr, "--json", "describe", id).wantCode(t, exitOK)
	mustContain(t, r.stdout, "\u202E")
}
