package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tinyllm/durable/worker"
)

// TestStartRefusesAnIdentityTheDaemonWouldRefuse: a worker whose identity
// holds an invisible character would have every poll refused; Start says so
// instead.
func TestStartRefusesAnIdentityTheDaemonWouldRefuse(t *testing.T) {
	t.Parallel()
	_, c := setup(t)
	w := worker.New(c, "q", worker.Options{Identity: "host\u200B:1"})
	w.RegisterActivityWithName(func(context.Context) error { return nil }, "A")
	err := w.Start()
	if err == nil {
		w.Stop()
		t.Fatal("Start with identity \"host\\u200b:1\" succeeded")
	}
	if !strings.Contains(err.Error(), "U+200B ZERO WIDTH SPACE") {
		t.Errorf("Start = %v, want it to name the character", err)
	}
}
