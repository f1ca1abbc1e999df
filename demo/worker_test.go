//go:build unix

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/demo/flaky"
	"github.com/tinyllm/durable/demo/harness"
)

// TestWorkerConnectionFlags runs a demo worker against a daemon that wants
// tokens: with a worker principal's --token it runs FlakyDemo to the end. A
// TLS file that does not load is a usage error (exit 2).
func TestWorkerConnectionFlags(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	const workerToken, opsToken = "demo-worker-token", "demo-ops-token"
	hash := func(token string) string {
		sum := sha256.Sum256([]byte(token))
		return hex.EncodeToString(sum[:])
	}
	auth := filepath.Join(dir, "auth.json")
	file := fmt.Sprintf(`{"principals": [
		{"name": "demo-worker", "role": "worker", "token_sha256": %q, "task_queues": [%q]},
		{"name": "ops", "role": "operator", "token_sha256": %q}]}`, hash(workerToken), client.DefaultTaskQueue, hash(opsToken))
	if err := os.WriteFile(auth, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := harness.Start(ctx, harness.Options{Dir: dir, Durabled: durabledBin, DaemonArgs: []string{"--auth", auth},
		Worker: []string{demoBin, "worker", "--token", workerToken}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := c.StartWorker()
	if err != nil {
		t.Fatal(err)
	}

	// Starting takes a worker's token; waiting for the result a reader's.
	starter, err := client.Dial(ctx, c.Addr(), client.WithToken(workerToken))
	if err != nil {
		t.Fatal(err)
	}
	defer starter.Close()
	run, err := starter.Start(ctx, flaky.WorkflowName, flaky.Input{Activities: 3, FailRate: 0.3, Seed: 2}, client.StartOptions{ID: "with-token"})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := client.Dial(ctx, c.Addr(), client.WithToken(opsToken))
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	if err := ops.GetRun(run.ID).Get(ctx, nil); err != nil {
		log, _ := os.ReadFile(w.LogPath)
		t.Fatalf("FlakyDemo %s: %v\nworker log:\n%s", run.ID, err, log)
	}

	cmd := exec.CommandContext(ctx, demoBin, "worker", "--addr", c.Addr(), "--token", workerToken,
		"--tls-ca", filepath.Join(dir, "missing.pem"), "--sink-dir", filepath.Join(dir, "own-sink"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "missing.pem") {
		t.Errorf("worker with a missing --tls-ca: %v, want exit 2 naming the file\n%s", err, out)
	}
}
