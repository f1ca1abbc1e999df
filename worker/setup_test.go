package worker_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/worker"
)

// TestMain removes the durabled binary the limits tests build.
func TestMain(m *testing.M) {
	code := m.Run()
	testdaemon.Cleanup()
	os.Exit(code)
}

// testTimeout bounds every wait of an end-to-end test.
const testTimeout = 30 * time.Second

// setup starts an in-process daemon without jitter (so retry gaps are the
// plain backoff) and returns its address and a client for it.
func setup(t *testing.T) (string, *client.Client) {
	t.Helper()
	addr := testdaemon.Start(t, engine.Options{Jitter: func(d time.Duration) time.Duration { return d }})
	return addr, dial(t, addr)
}

func dial(t *testing.T, addr string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.WithIdentity(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// startWorker registers what register adds, starts the worker and stops it
// when the test ends.
func startWorker(t *testing.T, c *client.Client, queue string, opts worker.Options, register func(w *worker.Worker)) *worker.Worker {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := worker.New(c, queue, opts)
	register(w)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or the test timeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func history(t *testing.T, c *client.Client, id string) []*durablev1.HistoryEvent {
	t.Helper()
	h, err := c.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func countEvents(h []*durablev1.HistoryEvent, typ durablev1.EventType) int {
	n := 0
	for _, ev := range h {
		if ev.GetType() == typ {
			n++
		}
	}
	return n
}

// pending returns the workflow's pending activity with id, or nil.
func pending(t *testing.T, c *client.Client, wfID, activityID string) *durablev1.PendingActivity {
	t.Helper()
	d, err := c.Describe(context.Background(), wfID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range d.GetPendingActivities() {
		if a.GetActivityId() == activityID {
			return a
		}
	}
	return nil
}
