package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/internal/testdaemon"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// nodesOf runs wf nodes --json against addr and returns the nodes by name.
func nodesOf(t *testing.T, addr string) map[string]*durablev1.Node {
	t.Helper()
	out := wf(t, "--addr", addr, "--json", "nodes").wantCode(t, exitOK).stdout
	var doc struct {
		Nodes []json.RawMessage `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("nodes --json: %v\n%s", err, out)
	}
	byName := map[string]*durablev1.Node{}
	for _, raw := range doc.Nodes {
		n := new(durablev1.Node)
		unmarshal(t, string(raw), n)
		byName[n.GetName()] = n
	}
	return byName
}

// TestTwoNodesOnOneDatabaseShowInWfNodes runs two real durabled nodes on
// one PostgreSQL database: wf nodes lists both alive through either, and
// work started through one is handed out by the other (the shared
// runtime); a third started under a live node's name is refused; one SIGKILLed is shown
// not alive once the liveness window has passed, while a client given both
// addresses keeps working through the other, and its name can then be
// taken again.
func TestTwoNodesOnOneDatabaseShowInWfNodes(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	args := func(node string) []string {
		return []string{"--store", "postgres", "--postgres-dsn", dsn, "--node", node}
	}
	a := testdaemon.Exec(t, "", args("node-a")...)
	b := testdaemon.Exec(t, "", args("node-b")...)
	list := a.Addr + "," + b.Addr

	for _, addr := range []string{a.Addr, b.Addr, list} {
		nodes := nodesOf(t, addr)
		if len(nodes) != 2 || !nodes["node-a"].GetAlive() || !nodes["node-b"].GetAlive() {
			t.Fatalf("wf --addr %s nodes = %v, want node-a and node-b alive", addr, nodes)
		}
	}
	table := wf(t, "--addr", list, "nodes", "--min-alive", "2").wantCode(t, exitOK).stdout
	mustContain(t, table, "2 nodes, 2 alive")

	// Either node answers any call: a workflow started through node-a is
	// handed to a worker polling node-b.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := dial(t, a.Addr).Service().StartWorkflow(ctx, &durablev1.StartWorkflowRequest{
		WorkflowId: "across-nodes", WorkflowType: "T", TaskQueue: "nodes"}); err != nil {
		t.Fatal(err)
	}
	wt, err := dial(t, b.Addr).Service().PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "nodes", Identity: "w"})
	if err != nil || wt.GetWorkflowId() != "across-nodes" {
		t.Fatalf("poll on node-b = %v, %v; want the workflow started through node-a", wt, err)
	}

	// A node under a live node's name is refused, with the store's reason.
	code, stderr := testdaemon.Run(t, append([]string{"--listen", "127.0.0.1:0"}, args("node-a")...)...)
	if code != 1 || !strings.Contains(stderr, `node name \"node-a\" is in use`) {
		t.Fatalf("a second node-a: exit %d, want 1 with the store's refusal; stderr:\n%s", code, stderr)
	}

	c, err := client.Dial(ctx, list)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	b.Kill()
	killed := time.Now()
	// node-b stops heartbeating; once the window has passed since its last
	// heartbeat, node-a shows it not alive.
	for {
		nodes := nodesOf(t, a.Addr)
		if !nodes["node-a"].GetAlive() {
			t.Fatalf("node-a not alive by its own account: %v", nodes)
		}
		if n := nodes["node-b"]; n != nil && !n.GetAlive() {
			t.Logf("node-b shown not alive %s after its SIGKILL (last seen %s before it)",
				time.Since(killed).Round(time.Millisecond), killed.Sub(n.GetLastSeenTime().AsTime()).Round(time.Millisecond))
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("node-b still shown alive long after its SIGKILL: %v", nodes)
		}
		time.Sleep(200 * time.Millisecond) // pacing between polls; the condition decides
	}
	r := wf(t, "--addr", a.Addr, "nodes", "--min-alive", "2").wantCode(t, exitFailed)
	if line := lineWith(r.stdout, "node-b"); !strings.Contains(line, " no ") {
		t.Errorf("node-b row = %q, want not alive\n%s", line, r.stdout)
	}
	mustContain(t, r.stdout, "2 nodes, 1 alive")

	// The client given both addresses is answered by the node left.
	unavailable := 0
	for i := 0; i < 10; i++ {
		resp, err := c.Nodes(ctx)
		for status.Code(err) == codes.Unavailable && ctx.Err() == nil {
			unavailable++
			resp, err = c.Nodes(ctx) // a call racing the kill fails so, and workers retry it
		}
		if err != nil || resp.GetAnsweredBy() != "node-a" {
			t.Fatalf("through %s after node-b died: answered by %q, %v; want node-a", list, resp.GetAnsweredBy(), err)
		}
	}

	t.Logf("through both addresses after node-b's SIGKILL: 10 calls answered by node-a, %d failed as Unavailable first", unavailable)

	// Its name is free again now that it is not alive.
	b.Restart()
	if nodes := nodesOf(t, b.Addr); !nodes["node-b"].GetAlive() || !nodes["node-a"].GetAlive() {
		t.Fatalf("after node-b restarted: %v, want both alive", nodes)
	}
}
