package main

import (
	"context"
	"encoding/json"
	"fmt"
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

// nodeArgs are durabled's flags for a node named node of the database dsn.
func nodeArgs(dsn, node string) []string {
	return []string{"--store", "postgres", "--postgres-dsn", dsn, "--node", node}
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
	args := func(node string) []string { return nodeArgs(dsn, node) }
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

// TestARedriveOperationGoesOnWhenItsNodeIsSIGKILLed runs two real durabled
// nodes on one PostgreSQL database and starts a redrive operation through
// node-a: wf ops names node-a as the node that runs it. node-a is then
// SIGKILLed midway; node-b takes the operation over once node-a has been
// silent past the liveness window, wf ops names node-b, and the operation
// completes with every letter released once.
func TestARedriveOperationGoesOnWhenItsNodeIsSIGKILLed(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	args := func(node string) []string { return nodeArgs(dsn, node) }
	a := testdaemon.Exec(t, "", args("node-a")...)
	b := testdaemon.Exec(t, "", args("node-b")...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Twenty activities of one workflow, each failed once with no retry.
	const letters = 20
	svc := dial(t, b.Addr).Service()
	if _, err := svc.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "outage", WorkflowType: "T", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wt, err := svc.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil {
		t.Fatal(err)
	}
	var schedule []*durablev1.Command
	for i := range letters {
		schedule = append(schedule, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY,
			ActivityId: fmt.Sprint(i), ActivityType: "Charge",
			ActivityOptions: &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 1}}})
	}
	if _, err := svc.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: schedule}); err != nil {
		t.Fatal(err)
	}
	for failed := 0; failed < letters; {
		r, err := svc.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w", MaxTasks: letters})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range r.GetTasks() {
			if _, err := svc.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(),
				Failure: &durablev1.Failure{Type: "Down", Message: "down"}}); err != nil {
				t.Fatal(err)
			}
			failed++
		}
	}

	out := wf(t, "--addr", a.Addr, "dlq", "redrive", "--all", "--rate", "4", "--reason", "INC-7").wantCode(t, exitOK).stdout
	id := strings.TrimSuffix(strings.Fields(out)[1], ":") // "started op-N: redriving …"
	describe := func(addr string) *durablev1.Operation {
		op := new(durablev1.Operation)
		unmarshal(t, wf(t, "--addr", addr, "--json", "ops", "describe", id).wantCode(t, exitOK).stdout, op)
		return op
	}
	if op := describe(b.Addr); op.GetNode() != "node-a" || op.GetMatched() != letters {
		t.Fatalf("%s through node-b = %v, want it run by node-a over %d letters", id, op, letters)
	}
	mustContain(t, lineWith(wf(t, "--addr", b.Addr, "ops", "list").wantCode(t, exitOK).stdout, id), " node-a ")
	mustContain(t, wf(t, "--addr", b.Addr, "ops", "describe", id).wantCode(t, exitOK).stdout, "Node:", "node-a")
	for describe(b.Addr).GetReleased() < 2 {
		if ctx.Err() != nil {
			t.Fatal("node-a released nothing")
		}
		time.Sleep(50 * time.Millisecond) // pacing between polls; the condition decides
	}

	a.Kill()
	killed := time.Now()
	var op *durablev1.Operation
	for op = describe(b.Addr); op.GetState() == durablev1.OperationState_OPERATION_STATE_RUNNING; op = describe(b.Addr) {
		if ctx.Err() != nil {
			t.Fatalf("%s still running long after node-a's SIGKILL: %v", id, op)
		}
		time.Sleep(100 * time.Millisecond) // pacing between polls; the condition decides
	}
	t.Logf("%s completed through node-b %s after node-a's SIGKILL", id, time.Since(killed).Round(time.Millisecond))
	if op.GetState() != durablev1.OperationState_OPERATION_STATE_COMPLETED || op.GetNode() != "node-b" ||
		op.GetReleased() != letters || op.GetSkipped() != 0 {
		t.Fatalf("%s = %v, want completed by node-b with all %d released", id, op, letters)
	}
	h, err := svc.GetWorkflowHistory(ctx, &durablev1.GetWorkflowHistoryRequest{WorkflowId: "outage"})
	if err != nil {
		t.Fatal(err)
	}
	redriven := map[string]int{}
	for _, e := range h.GetEvents() {
		if e.GetType() == durablev1.EventType_EVENT_TYPE_ACTIVITY_REDRIVEN {
			redriven[e.GetActivityId()]++
		}
	}
	for i := range letters {
		if n := redriven[fmt.Sprint(i)]; n != 1 {
			t.Errorf("activity %d redriven %d times, want once", i, n)
		}
	}
	mustContain(t, b.Logs(), `msg="now running a redrive operation"`, "operation_id="+id, "from=node-a")
}

// TestAWorkerPollingOneNodeIsListedByAnother runs two real durabled nodes
// on one PostgreSQL database and a worker that polls only node-a: node-b's
// wf queues lists it, parked while its poll is open, and once an activity is
// ready on its queue node-b's wf queues --check, a health probe, passes: the
// worker polled within the minute, through another node.
func TestAWorkerPollingOneNodeIsListedByAnother(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a := testdaemon.Exec(t, "", nodeArgs(dsn, "node-a")...)
	b := testdaemon.Exec(t, "", nodeArgs(dsn, "node-b")...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// waitOnB polls node-b's wf queues until ok holds of queue only-a.
	waitOnB := func(what string, ok func(*durablev1.TaskQueue) bool) {
		t.Helper()
		for q := queuesJSON(t, b.Addr, "only-a"); !ok(q); q = queuesJSON(t, b.Addr, "only-a") {
			if ctx.Err() != nil {
				t.Fatalf("node-b never showed %s: %v", what, q)
			}
			time.Sleep(100 * time.Millisecond) // pacing between polls; the condition decides
		}
	}
	parked := func(q *durablev1.TaskQueue) bool {
		for _, p := range q.GetPollers() {
			if p.GetIdentity() == "worker-on-a" && p.GetKind() == durablev1.TaskKind_TASK_KIND_ACTIVITY {
				return p.GetParked()
			}
		}
		return false
	}

	svc := dial(t, a.Addr).Service()
	if _, err := svc.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "w", WorkflowType: "T", TaskQueue: "only-a"}); err != nil {
		t.Fatal(err)
	}
	wt, err := svc.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "only-a", Identity: "worker-on-a"})
	if err != nil {
		t.Fatal(err)
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		svc.PollActivityTask(pollCtx, &durablev1.PollActivityTaskRequest{TaskQueue: "only-a", Identity: "worker-on-a"})
	}()
	waitOnB("the worker parked on node-a", parked)
	mustContain(t, lineWith(wf(t, "--addr", b.Addr, "queues").wantCode(t, exitOK).stdout, "only-a"), "(1 parked)")

	// The poll ends; then the workflow schedules an activity, which waits.
	stopPoll()
	<-polled
	waitOnB("the worker no longer parked", func(q *durablev1.TaskQueue) bool { return !parked(q) })
	if _, err := svc.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge"}}}); err != nil {
		t.Fatal(err)
	}
	waitOnB("the activity ready", func(q *durablev1.TaskQueue) bool { return q.GetActivityTasks().GetReady() == 1 })
	if q := queuesJSON(t, b.Addr, "only-a"); q.GetStalled() {
		t.Fatalf("node-b calls only-a unpolled: %v", q)
	}
	wf(t, "--addr", b.Addr, "queues", "--check").wantCode(t, exitOK)
}
