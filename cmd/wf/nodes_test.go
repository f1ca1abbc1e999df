package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
)

func TestNodesListsTheOneBadgerDaemonAlive(t *testing.T) {
	t.Parallel()
	addr, _ := setup(t)
	name := server.DefaultNodeName()

	table := wf(t, "--addr", addr, "nodes").wantCode(t, exitOK).stdout
	if line := lineWith(table, name); !strings.Contains(line, " yes ") {
		t.Errorf("nodes table has no alive row for %s:\n%s", name, table)
	}
	mustContain(t, table, "NODE", "ALIVE", "LAST SEEN", "STARTED", "1 node, 1 alive (heard from within 5s). Answered by "+name+".")

	r := wf(t, "--addr", addr, "--json", "nodes").wantCode(t, exitOK)
	var doc struct {
		ServerTime  string            `json:"serverTime"`
		AnsweredBy  string            `json:"answeredBy"`
		AliveWithin string            `json:"aliveWithin"`
		Nodes       []json.RawMessage `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("nodes --json: %v\n%s", err, r.stdout)
	}
	if doc.AnsweredBy != name || doc.AliveWithin != "5s" || doc.ServerTime == "" || len(doc.Nodes) != 1 {
		t.Fatalf("nodes --json = %+v, want one node %s answering, alive within 5s", doc, name)
	}
	var n durablev1.Node
	unmarshal(t, string(doc.Nodes[0]), &n)
	if n.GetName() != name || !n.GetAlive() || n.GetStartTime() == nil || n.GetLastSeenTime() == nil {
		t.Errorf("nodes --json node = %v", &n)
	}
	if !strings.Contains(string(doc.Nodes[0]), `"lastSeenTime"`) {
		t.Errorf("node is not protojson camelCase: %s", doc.Nodes[0])
	}

	r = wf(t, "--addr", addr, "nodes", "--min-alive", "2").wantCode(t, exitFailed)
	mustContain(t, r.stderr, "1 node alive, fewer than --min-alive 2")
	wf(t, "--addr", addr, "nodes", "--min-alive", "1").wantCode(t, exitOK)
}

func TestNodesThroughAnAddressListAnswersFromEitherNode(t *testing.T) {
	t.Parallel()
	a := testdaemon.StartServer(t, engine.Options{}, server.Options{Node: "node-a"})
	b := testdaemon.StartServer(t, engine.Options{}, server.Options{Node: "node-b"})
	seen := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		// Each wf dials anew: round robin starts at a random node.
		out := wf(t, "--addr", a, "--addr", b, "--json", "nodes").wantCode(t, exitOK).stdout
		var doc struct {
			AnsweredBy string `json:"answeredBy"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		seen[doc.AnsweredBy] = true
	}
	if !seen["node-a"] || !seen["node-b"] {
		t.Fatalf("answered by %v through --addr %s --addr %s, want both nodes", seen, a, b)
	}
}

func TestNodesUsageAndUnreachable(t *testing.T) {
	t.Parallel()
	addr, _ := setup(t)
	r := wf(t, "nodes", "--help").wantCode(t, exitOK)
	mustContain(t, r.stdout, "Usage: wf nodes", "Examples:", "--min-alive")
	r = wf(t, "--addr", addr, "nodes", "extra").wantCode(t, exitUsage)
	mustContain(t, r.stderr, `unexpected argument "extra"`)
	r = wf(t, "--addr", addr, "nodes", "--min-alive", "-1").wantCode(t, exitUsage)
	mustContain(t, r.stderr, "--min-alive must be 0 or more")
	r = wf(t, "--addr", addr+",,"+addr, "nodes").wantCode(t, exitUsage)
	mustContain(t, r.stderr, "part 2 is empty")
	wf(t, "--addr", closedAddr(t), "nodes").wantCode(t, exitUnreachable)
	wf(t, "--addr", closedAddr(t)+","+closedAddr(t), "nodes").wantCode(t, exitUnreachable)
}

func TestNodesTableSaysWhichNodesAreNotAlive(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	printNodes(&b, &durablev1.ListNodesResponse{
		AnsweredBy: "node-b", ServerTime: timestamppb.New(now), AliveWithin: durationpb.New(5 * time.Second),
		Nodes: []*durablev1.Node{
			{Name: "node-a", StartTime: timestamppb.New(now.Add(-time.Hour)), LastSeenTime: timestamppb.New(now.Add(-time.Minute)), Alive: false},
			{Name: "node-b", StartTime: timestamppb.New(now.Add(-time.Hour)), LastSeenTime: timestamppb.New(now.Add(-time.Second)), Alive: true},
		},
	}, 1)
	out := b.String()
	if !strings.Contains(lineWith(out, "node-a"), " no ") || !strings.Contains(lineWith(out, "node-a"), "1m00s ago") {
		t.Errorf("node-a row = %q, want not alive, seen 1m00s ago", lineWith(out, "node-a"))
	}
	mustContain(t, out, "2 nodes, 1 alive (heard from within 5s). Answered by node-b.")
	if got := protoDuration(1500 * time.Millisecond); got != "1.5s" {
		t.Errorf("protoDuration(1.5s) = %q", got)
	}
	b.Reset()
	printNodes(&b, &durablev1.ListNodesResponse{AnsweredBy: "x"}, 0)
	mustContain(t, b.String(), "No nodes listed")
}
