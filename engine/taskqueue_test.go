package engine_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// queue returns the engine's view of one task queue, nil when not listed.
func (h *harness) queue(name string) *durablev1.TaskQueue {
	h.t.Helper()
	return queueOf(h.t, h.e, name)
}

func queueOf(t *testing.T, e *engine.Engine, name string) *durablev1.TaskQueue {
	t.Helper()
	r, err := e.ListTaskQueues(context.Background(), &durablev1.ListTaskQueuesRequest{TaskQueue: name})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetTaskQueues()) == 0 {
		return nil
	}
	return r.GetTaskQueues()[0]
}

// waitQueue waits until ok holds for queue name, failing after 5 s.
func (h *harness) waitQueue(name string, ok func(*durablev1.TaskQueue) bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		q := h.queue(name)
		if ok(q) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("queue %q never got there; last seen %v", name, q)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPollersAppearParkAndAreForgotten(t *testing.T) {
	h := setup(t, engine.Options{})
	if q := h.queue("q"); q != nil {
		t.Fatalf("queue listed before anything happened: %v", q)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.e.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "worker-1"})
	}()
	h.waitQueue("q", func(q *durablev1.TaskQueue) bool { return len(q.GetPollers()) == 1 && q.GetPollers()[0].GetParked() })
	p := h.queue("q").GetPollers()[0]
	if p.GetIdentity() != "worker-1" || p.GetKind() != durablev1.TaskKind_TASK_KIND_ACTIVITY || !p.GetLastPollTime().AsTime().Equal(t0) {
		t.Fatalf("poller = %v", p)
	}

	h.clock.Advance(3 * time.Second)
	cancel()
	<-done
	p = h.queue("q").GetPollers()[0]
	if p.GetParked() || !p.GetLastPollTime().AsTime().Equal(t0.Add(3*time.Second)) {
		t.Fatalf("after the poll ended: %v, want not parked, last poll at its end", p)
	}

	h.clock.Advance(5 * time.Minute)
	if q := h.queue("q"); len(q.GetPollers()) != 1 {
		t.Fatalf("poller forgotten at exactly five minutes: %v", q)
	}
	h.clock.Advance(time.Second)
	if q := h.queue("q"); q != nil {
		t.Fatalf("a poller unseen for over five minutes, on a queue with nothing in it, is still listed: %v", q)
	}
}

func TestBacklogCountsReadyTasksAndTheOldestDueTime(t *testing.T) {
	h := setup(t, engine.Options{})
	h.start("a", "Flaky")
	q := h.queue("q")
	want := &durablev1.TaskQueue{
		Name:          "q",
		WorkflowTasks: &durablev1.TaskBacklog{Ready: 1, OldestReadyTime: ts(t0), Stalled: true},
		ActivityTasks: &durablev1.TaskBacklog{},
		Stalled:       true,
	}
	if !proto.Equal(want, q) {
		t.Fatalf("a workflow nobody polls for:\n got %v\nwant %v", q, want)
	}

	h.clock.Advance(5 * time.Second)
	h.start("b", "Flaky")
	if wt := h.queue("q").GetWorkflowTasks(); wt.GetReady() != 2 || !wt.GetOldestReadyTime().AsTime().Equal(t0) {
		t.Fatalf("two waiting: %v, want 2 ready, oldest at t0", wt)
	}

	if h.pollWorkflow() == nil {
		t.Fatal("no workflow task")
	}
	q = h.queue("q")
	if wt := q.GetWorkflowTasks(); wt.GetReady() != 1 || !wt.GetOldestReadyTime().AsTime().Equal(t0.Add(5*time.Second)) || wt.GetStalled() || q.GetStalled() {
		t.Fatalf("after a poll took the oldest: %v, want 1 ready since t0+5s, not stalled", q)
	}

	h.clock.Advance(61 * time.Second)
	if q := h.queue("q"); !q.GetStalled() || len(q.GetPollers()) != 1 {
		t.Fatalf("a minute after the last poll, with work ready: %v, want stalled with the poller still listed", q)
	}
}

func TestLeasesAreCountedPerWorkerAndABackoffIsLater(t *testing.T) {
	h := setup(t, engine.Options{})
	h.startWithActivity("a", &durablev1.ActivityOptions{
		StartToCloseTimeout: dur(time.Minute),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 1000, MaxAttempts: 3},
	})
	if q := h.queue("q"); q.GetActivityTasks().GetReady() != 1 || !q.GetActivityTasks().GetStalled() || q.GetWorkflowTasks().GetStalled() {
		t.Fatalf("scheduled: %v, want 1 activity ready and stalled (only a workflow worker polled yet)", q)
	}
	task := h.pollActivity()
	if task == nil {
		t.Fatal("no activity task")
	}
	q := h.queue("q")
	wantLeases := []*durablev1.WorkerLeases{{Identity: "worker-1", Activities: 1}}
	if len(q.GetLeases()) != 1 || !proto.Equal(wantLeases[0], q.GetLeases()[0]) || q.GetActivityTasks().GetReady() != 0 {
		t.Fatalf("leased: %v, want leases %v and nothing ready", q, wantLeases)
	}

	h.fail(task, &durablev1.Failure{Message: "boom", Type: "Boom"})
	q = h.queue("q")
	if at := q.GetActivityTasks(); len(q.GetLeases()) != 0 || at.GetReady() != 0 || at.GetLater() != 1 {
		t.Fatalf("retrying: %v, want no lease, one task later", q)
	}
	h.clock.Advance(time.Second)
	if at := h.queue("q").GetActivityTasks(); at.GetReady() != 1 || at.GetLater() != 0 || !at.GetOldestReadyTime().AsTime().Equal(t0.Add(time.Second)) {
		t.Fatalf("backoff over: %v, want 1 ready since t0+1s", at)
	}
}

func TestTaskQueueBooksAreRebuiltAtStartAndPollersAreNot(t *testing.T) {
	h := setup(t, engine.Options{})
	h.startWithActivity("a", &durablev1.ActivityOptions{StartToCloseTimeout: dur(time.Hour)})
	h.startWithActivity("b", &durablev1.ActivityOptions{StartToCloseTimeout: dur(time.Hour)})
	if h.pollActivity() == nil {
		t.Fatal("no activity task")
	}
	h.start("c", "Flaky")
	before := h.queue("q")
	before.Pollers = nil

	h.e.Close()
	e, err := engine.New(h.store, engine.Options{Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	after := queueOf(t, e, "q")
	before.Stalled, before.WorkflowTasks.Stalled, before.ActivityTasks.Stalled = true, true, true
	if !proto.Equal(before, after) {
		t.Fatalf("after a restart:\n got %v\nwant %v", after, before)
	}
}

func TestSummarizeQueuesMarksReadyWorkWithoutALivePollerStalled(t *testing.T) {
	now := t0.Add(time.Hour)
	cases := []struct {
		name    string
		book    engine.QueueBook
		pollers []engine.PollerState
		wf, act bool // stalled
	}{
		{name: "nothing queued, nobody polling", book: engine.QueueBook{Leases: map[string]int{"w": 1}}},
		{name: "workflow task ready, nobody polling", book: engine.QueueBook{WorkflowTasks: slices.Values([]time.Time{now})}, wf: true},
		{name: "activity only later, nobody polling", book: engine.QueueBook{ActivityTasks: slices.Values([]time.Time{now.Add(time.Second)})}},
		{
			name:    "activity ready, a workflow poller only",
			book:    engine.QueueBook{ActivityTasks: slices.Values([]time.Time{now})},
			pollers: []engine.PollerState{{Queue: "q", Kind: engine.WorkflowTask, Parked: true, Last: now}},
			act:     true,
		},
		{
			name:    "activity ready, an activity poller parked for long",
			book:    engine.QueueBook{ActivityTasks: slices.Values([]time.Time{now})},
			pollers: []engine.PollerState{{Queue: "q", Kind: engine.ActivityTask, Parked: true, Last: now.Add(-time.Hour)}},
		},
		{
			name:    "activity ready, an activity poller that polled 59s ago",
			book:    engine.QueueBook{ActivityTasks: slices.Values([]time.Time{now})},
			pollers: []engine.PollerState{{Queue: "q", Kind: engine.ActivityTask, Last: now.Add(-59 * time.Second)}},
		},
		{
			name:    "activity ready, an activity poller that polled 61s ago",
			book:    engine.QueueBook{ActivityTasks: slices.Values([]time.Time{now})},
			pollers: []engine.PollerState{{Queue: "q", Kind: engine.ActivityTask, Last: now.Add(-61 * time.Second)}},
			act:     true,
		},
		{
			name:    "activity ready, an activity poller silent for 2m that holds a lease (every slot busy)",
			book:    engine.QueueBook{ActivityTasks: slices.Values([]time.Time{now})},
			pollers: []engine.PollerState{{Queue: "q", Kind: engine.ActivityTask, Last: now.Add(-2 * time.Minute), Leases: 1}},
		},
		{
			name:    "activity ready, a live poller of another queue",
			book:    engine.QueueBook{ActivityTasks: slices.Values([]time.Time{now})},
			pollers: []engine.PollerState{{Queue: "other", Kind: engine.ActivityTask, Parked: true, Last: now}},
			act:     true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qs := engine.SummarizeQueues(map[string]engine.QueueBook{"q": c.book}, c.pollers, now)
			var q *durablev1.TaskQueue
			for _, x := range qs {
				if x.GetName() == "q" {
					q = x
				}
			}
			if q == nil {
				t.Fatal("queue q not listed")
			}
			if q.GetWorkflowTasks().GetStalled() != c.wf || q.GetActivityTasks().GetStalled() != c.act || q.GetStalled() != (c.wf || c.act) {
				t.Fatalf("stalled: workflow %v activity %v queue %v, want %v %v", q.GetWorkflowTasks().GetStalled(), q.GetActivityTasks().GetStalled(), q.GetStalled(), c.wf, c.act)
			}
		})
	}
}

func TestAWorkflowShowsWhenItsTaskBecameDueWhileItWaitsForAWorker(t *testing.T) {
	h := setup(t, engine.Options{})
	h.start("a", "Flaky")
	w := h.describe("a").GetWorkflow()
	if !w.GetWorkflowTaskReadyTime().AsTime().Equal(t0) || w.GetWorkflowTaskAttempt() != 1 {
		t.Fatalf("waiting: ready %v attempt %d, want t0 and 1", w.GetWorkflowTaskReadyTime(), w.GetWorkflowTaskAttempt())
	}
	if h.pollWorkflow() == nil {
		t.Fatal("no workflow task")
	}
	if w := h.describe("a").GetWorkflow(); w.GetWorkflowTaskReadyTime() != nil || w.GetWorkflowTaskAttempt() != 0 {
		t.Fatalf("taken by a worker: %v, want no workflow task fields", w)
	}
}

func TestWatchSendsTheTaskQueuesAtMostOnceASecondAndOnlyWhenTheyChange(t *testing.T) {
	h := setup(t, engine.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan *durablev1.WatchEvent, 100)
	go h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
		events <- ev
		return nil
	})
	// nextQueues returns the next event that carries the task queues,
	// failing after 5 s. While none has come it moves the clock on a second
	// every 100 ms: the sender sets its next one-second wait only after it
	// has sent, so an Advance of the test's may come before the wait it
	// was meant to end (seconds without a change send nothing, which the
	// checks below rely on).
	nextQueues := func() *durablev1.WatchEvent {
		t.Helper()
		timeout := time.After(5 * time.Second)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case ev := <-events:
				if ev.GetTaskQueues() != nil {
					return ev
				}
			case <-tick.C:
				h.clock.Advance(time.Second)
			case <-timeout:
				t.Fatal("no task queues within 5s")
				return nil
			}
		}
	}
	done := nextQueues()
	if done.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE || len(done.GetTaskQueues().GetTaskQueues()) != 0 {
		t.Fatalf("first task queues: %v, want an empty list in SNAPSHOT_DONE", done)
	}

	h.start("a", "Flaky")
	h.clock.Advance(time.Second)
	up := nextQueues()
	if qs := up.GetTaskQueues().GetTaskQueues(); up.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT || len(qs) != 1 || !qs[0].GetStalled() {
		t.Fatalf("a second after a workflow started on a queue nobody polls: %v", up)
	}

	// Nothing changed: nothing sent, however many seconds pass.
	for range 3 {
		h.clock.Advance(time.Second)
	}
	h.start("b", "Flaky") // a change, then one list for it
	h.clock.Advance(time.Second)
	up = nextQueues()
	if wt := up.GetTaskQueues().GetTaskQueues()[0].GetWorkflowTasks(); wt.GetReady() != 2 {
		t.Fatalf("after a second workflow: %v, want 2 ready (and no list sent for the seconds without a change)", up)
	}
	select {
	case ev := <-events:
		if ev.GetTaskQueues() != nil {
			t.Fatalf("a second list for one change: %v", ev)
		}
	default:
	}
}

// BenchmarkSummarizeQueues is the cost of one ListTaskQueues (and one
// Watch push) with 10,000 tasks queued on ten queues and twenty pollers.
func BenchmarkSummarizeQueues(b *testing.B) {
	now := t0.Add(time.Hour)
	books := map[string]engine.QueueBook{}
	var pollers []engine.PollerState
	for q := range 10 {
		name := "queue-" + string(rune('a'+q))
		due := map[int]time.Time{}
		for i := range 1000 {
			due[i] = now.Add(time.Duration(i-500) * time.Millisecond)
		}
		books[name] = engine.QueueBook{Leases: map[string]int{"w1": 3, "w2": 4}, ActivityTasks: maps.Values(due)}
		pollers = append(pollers, engine.PollerState{Queue: name, Kind: engine.ActivityTask, Identity: "w1", Parked: true, Last: now},
			engine.PollerState{Queue: name, Kind: engine.WorkflowTask, Identity: "w1", Last: now})
	}
	b.ReportAllocs()
	for b.Loop() {
		engine.SummarizeQueues(books, pollers, now)
	}
}

func TestAPollerThatHoldsLeasesIsNotForgotten(t *testing.T) {
	h := setup(t, engine.Options{})
	h.startWithActivity("a", &durablev1.ActivityOptions{StartToCloseTimeout: dur(time.Hour)})
	if h.pollActivity() == nil {
		t.Fatal("no activity task")
	}
	h.start("b", "Flaky") // work for the workflow poller, which holds nothing
	h.clock.Advance(10 * time.Minute)
	q := h.queue("q")
	if len(q.GetPollers()) != 1 || q.GetPollers()[0].GetIdentity() != "worker-1" || q.GetPollers()[0].GetKind() != durablev1.TaskKind_TASK_KIND_ACTIVITY {
		t.Fatalf("ten minutes on: pollers %v, want only worker-1, which holds a lease", q.GetPollers())
	}
	if q.GetActivityTasks().GetStalled() || !q.GetWorkflowTasks().GetStalled() {
		t.Fatalf("ten minutes on: %v, want workflow tasks stalled, activities not", q)
	}
}

// TestSummarizeQueuesCountsTasksBeyondTheWindowAsLater: the activity tasks
// the engine holds only as a count are later, beside the ones it holds,
// and never make a queue stalled.
func TestSummarizeQueuesCountsTasksBeyondTheWindowAsLater(t *testing.T) {
	now := t0.Add(time.Hour)
	books := map[string]engine.QueueBook{
		"held":   {ActivityTasks: slices.Values([]time.Time{now, now.Add(time.Second)}), ActivitiesBeyond: 1000},
		"beyond": {ActivitiesBeyond: 5},
	}
	qs := engine.SummarizeQueues(books, nil, now)
	got := map[string]string{}
	for _, q := range qs {
		got[q.GetName()] = fmt.Sprintf("%d ready, %d later, stalled %v", q.GetActivityTasks().GetReady(), q.GetActivityTasks().GetLater(), q.GetStalled())
	}
	want := map[string]string{"held": "1 ready, 1001 later, stalled true", "beyond": "0 ready, 5 later, stalled false"}
	if !maps.Equal(got, want) {
		t.Errorf("queues = %v, want %v", got, want)
	}
}
