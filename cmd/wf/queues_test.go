package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// queuesJSON runs wf queues --json and returns the queue named name, nil
// when it is not listed.
func queuesJSON(t *testing.T, addr, name string) *durablev1.TaskQueue {
	t.Helper()
	r := wf(t, "--addr", addr, "--json", "queues").wantCode(t, exitOK)
	var doc struct {
		ServerTime string            `json:"serverTime"`
		TaskQueues []json.RawMessage `json:"taskQueues"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.TaskQueues == nil || doc.ServerTime == "" {
		t.Fatalf("queues --json: %v\n%s", err, r.stdout)
	}
	for _, raw := range doc.TaskQueues {
		var q durablev1.TaskQueue
		unmarshal(t, string(raw), &q)
		if q.GetName() == name {
			return &q
		}
	}
	return nil
}

func TestQueuesShowAWorkflowNobodyPollsForAsStalledUntilAPollerComes(t *testing.T) {
	t.Parallel()
	addr, c := setup(t)
	d := newDriver(t, c, "unpolled")
	d.start("stuck-1", "Checkout")

	deadline := time.Now().Add(5 * time.Second)
	for {
		q := queuesJSON(t, addr, "unpolled")
		if q.GetStalled() && q.GetWorkflowTasks().GetStalled() && q.GetWorkflowTasks().GetReady() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not shown stalled within 5s: %v", q)
		}
		time.Sleep(50 * time.Millisecond)
	}
	table := wf(t, "--addr", addr, "queues").wantCode(t, exitOK).stdout
	line := lineWith(table, "unpolled")
	for _, want := range []string{"no poller (workflow tasks)", " 0 "} {
		if !strings.Contains(line, want) {
			t.Errorf("queues table row %q lacks %q\n%s", line, want, table)
		}
	}
	if !strings.Contains(table, "QUEUE") || !strings.Contains(table, "WF TASKS") || !strings.Contains(table, "STATUS") {
		t.Errorf("queues table header:\n%s", table)
	}
	wf(t, "--addr", addr, "queues", "--check").wantCode(t, exitFailed)
	described := wf(t, "--addr", addr, "describe", "stuck-1").wantCode(t, exitOK).stdout
	if w := lineWith(described, "Waiting:"); !strings.Contains(w, "workflow task waiting ") || !strings.HasSuffix(strings.TrimSpace(w), "on queue unpolled, no poller") {
		t.Errorf("describe of a workflow on a queue nobody polls says %q\n%s", w, described)
	}

	// A worker comes and takes the task; its poll is remembered.
	d.decide(schedule("1", "ChargeCard"))
	q := queuesJSON(t, addr, "unpolled")
	if q.GetWorkflowTasks().GetStalled() || q.GetWorkflowTasks().GetReady() != 0 || len(q.GetPollers()) != 1 || q.GetPollers()[0].GetIdentity() != "test-worker" {
		t.Fatalf("after a worker polled: %v, want workflow tasks not stalled, its poller listed", q)
	}
	// It scheduled an activity, and nobody polls for activities yet.
	if !q.GetStalled() || q.GetActivityTasks().GetReady() != 1 || !q.GetActivityTasks().GetStalled() {
		t.Fatalf("activity scheduled with no activity poller: %v, want 1 ready and stalled", q)
	}
	if s := lineWith(wf(t, "--addr", addr, "queues").wantCode(t, exitOK).stdout, "unpolled"); !strings.Contains(s, "no poller (activities)") {
		t.Errorf("queues row %q, want no poller (activities)", s)
	}
	described = wf(t, "--addr", addr, "describe", "stuck-1").wantCode(t, exitOK).stdout
	if w := lineWith(described, "Waiting:"); w != "" {
		t.Errorf("describe of a workflow whose task a worker took still says %q", w)
	}
	if a := lineWith(described, "ChargeCard"); !strings.Contains(a, "no poller") {
		t.Errorf("describe of an activity on a queue nobody polls for activities: %q\n%s", a, described)
	}
	task := d.activity()
	q = queuesJSON(t, addr, "unpolled")
	if q.GetStalled() || len(q.GetLeases()) != 1 || q.GetLeases()[0].GetIdentity() != "test-worker" || q.GetLeases()[0].GetActivities() != 1 {
		t.Fatalf("after the activity was leased: %v, want not stalled, one lease of test-worker", q)
	}
	if task.GetActivityId() != "1" {
		t.Fatalf("leased %v", task)
	}
	wf(t, "--addr", addr, "queues", "--check").wantCode(t, exitOK)
	one := wf(t, "--addr", addr, "queues", "unpolled").wantCode(t, exitOK).stdout
	for _, want := range []string{"Pollers of unpolled:", "test-worker", "workflow", "activity", "Leases of unpolled:"} {
		if !strings.Contains(one, want) {
			t.Errorf("queues unpolled lacks %q:\n%s", want, one)
		}
	}
}

func TestQueuesUsage(t *testing.T) {
	t.Parallel()
	r := wf(t, "queues", "--help").wantCode(t, exitOK)
	if !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "no poller") {
		t.Errorf("queues --help:\n%s", r.stdout)
	}
	wf(t, "queues", "a", "b").wantCode(t, exitUsage)
	wf(t, "--addr", closedAddr(t), "queues").wantCode(t, exitUnreachable)
}

// lineWith returns the first line of s that contains sub, "" if none.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

func TestWatchPrintsOneLinePerTaskQueue(t *testing.T) {
	var b strings.Builder
	now := time.Date(2026, 1, 1, 6, 14, 5, 0, time.UTC)
	err := printEvent(&b, &durablev1.WatchEvent{
		Kind:       durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		ServerTime: timestamppb.New(now),
		TaskQueues: &durablev1.TaskQueueList{TaskQueues: []*durablev1.TaskQueue{{
			Name:          "orders",
			WorkflowTasks: &durablev1.TaskBacklog{Ready: 1, OldestReadyTime: timestamppb.New(now.Add(-5900 * time.Millisecond)), Stalled: true},
			ActivityTasks: &durablev1.TaskBacklog{Later: 2},
			Stalled:       true,
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "queue orders pollers=0 backlog=0 later=2 oldest=5.9s wf-tasks=1 leases=0 no poller (workflow tasks)") {
		t.Errorf("watch line:\n%s", b.String())
	}
}
