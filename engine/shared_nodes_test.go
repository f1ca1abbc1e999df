package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	pgstore "github.com/tinyllm/durable/store/postgres"
)

// These tests run two or three engines on one PostgreSQL database, each on
// a store of its own under a node name of its own, as durabled nodes do.
// They use PostgreSQL whichever store DURABLE_TEST_STORE picks.

// hangAfter bounds every wait of these tests: far beyond what any step
// takes, so only a hang reaches it.
const hangAfter = 60 * time.Second

type node struct {
	name  string
	e     *engine.Engine
	store *pgstore.Store
}

// sharedNodes opens n engines named a, b, c... on one fresh database, with
// opts (the clock too, when set: a FakeClock shared by all of them makes
// their timers fall due at one instant).
func sharedNodes(t *testing.T, n int, opts engine.Options) []*node {
	t.Helper()
	dsn := testpg.Database(t)
	if opts.Jitter == nil {
		opts.Jitter = func(d time.Duration) time.Duration { return d }
	}
	var nodes []*node
	for i := range n {
		name := string(rune('a' + i))
		st, err := pgstore.Open(dsn, pgstore.Options{MaxConns: 4, Node: name})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(st, opts)
		if err != nil {
			st.Close()
			t.Fatal(err)
		}
		nd := &node{name: name, e: e, store: st}
		t.Cleanup(func() {
			nd.e.Close()
			nd.store.Close()
		})
		nodes = append(nodes, nd)
	}
	return nodes
}

// waitFor polls cond until it holds, failing the test after hangAfter.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangAfter)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: still waiting for %s", hangAfter, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func parked(e *engine.Engine, kind engine.TaskKind) int {
	n := 0
	for _, p := range e.Gauges().Polls {
		if p.Kind == kind {
			n += p.Parked
		}
	}
	return n
}

// scheduleActivities starts workflow wf through e and completes its first
// workflow task with one ScheduleActivity command per id.
func scheduleActivities(t *testing.T, e *engine.Engine, wf string, opts *durablev1.ActivityOptions, ids ...string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wt := pollWorkflowOn(t, e)
	var cmds []*durablev1.Command
	for _, id := range ids {
		cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: id, ActivityType: "Charge", ActivityOptions: opts})
	}
	if _, err := e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
		t.Fatal(err)
	}
}

// pollWorkflowOn takes the next workflow task of queue q from e, waiting
// for one.
func pollWorkflowOn(t *testing.T, e *engine.Engine) *durablev1.PollWorkflowTaskResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangAfter)
	defer cancel()
	r, err := e.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetTaskToken()) == 0 {
		t.Fatal("no workflow task")
	}
	return r
}

// TestSharedNodesHandATaskScheduledThroughOneToAPollParkedOnAnother: a
// poll parked on node b gets the activity a workflow task completed
// through node a schedules, woken by a's notice; the latency from the
// completion's call to the poll's answer is logged.
func TestSharedNodesHandATaskScheduledThroughOneToAPollParkedOnAnother(t *testing.T) {
	t.Parallel()
	nodes := sharedNodes(t, 2, engine.Options{PollTimeout: hangAfter})
	a, b := nodes[0].e, nodes[1].e
	const rounds = 200
	var took []time.Duration
	for i := range rounds {
		got := make(chan *durablev1.PollActivityTaskResponse, 1)
		go func() {
			r, err := b.PollActivityTask(context.Background(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "b"})
			if err != nil {
				t.Error(err)
			}
			got <- r
		}()
		waitUntil(t, "b's poll to park", func() bool { return parked(b, engine.ActivityTask) == 1 })
		wf := fmt.Sprintf("wf-%d", i)
		if _, err := a.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "W", TaskQueue: "q"}); err != nil {
			t.Fatal(err)
		}
		wt := pollWorkflowOn(t, a)
		began := time.Now()
		if _, err := a.CompleteWorkflowTask(context.Background(), &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
			Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge",
		}}}); err != nil {
			t.Fatal(err)
		}
		var r *durablev1.PollActivityTaskResponse
		select {
		case r = <-got:
		case <-time.After(hangAfter):
			t.Fatalf("round %d: b's poll got nothing within %s", i, hangAfter)
		}
		took = append(took, time.Since(began))
		if len(r.GetTasks()) != 1 || r.GetTasks()[0].GetWorkflowId() != wf {
			t.Fatalf("round %d: b's poll got %v, want the activity of %s", i, r.GetTasks(), wf)
		}
	}
	slices.Sort(took)
	t.Logf("schedule through a → poll parked on b, %d tasks: p50 %s, p90 %s, p99 %s, max %s", rounds,
		took[rounds/2], took[rounds*9/10], took[rounds*99/100], took[rounds-1])
}

// TestSharedNodesHandEachRetryDueAtOneInstantOutOnce: retries that fall
// due at one instant, and then leases that expire at one instant, with
// three nodes polling and firing timers at once: every attempt is handed
// out once and every lease times out once.
func TestSharedNodesHandEachRetryDueAtOneInstantOutOnce(t *testing.T) {
	t.Parallel()
	clock := engine.NewFakeClock(t0)
	nodes := sharedNodes(t, 3, engine.Options{Clock: clock})
	const n = 60
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprint(i))
	}
	opts := &durablev1.ActivityOptions{
		StartToCloseTimeout: dur(time.Minute),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 1000, Backoff: 1, MaxAttempts: 10},
	}
	scheduleActivities(t, nodes[0].e, "wf", opts, ids...)

	// race has the three nodes poll until n attempts are handed out, and
	// returns the tasks each activity was handed out in.
	race := func(attempt int32) map[string][]*durablev1.ActivityTask {
		t.Helper()
		var mu sync.Mutex
		got := map[string][]*durablev1.ActivityTask{}
		total := 0
		var wg sync.WaitGroup
		deadline := time.Now().Add(hangAfter)
		for _, nd := range nodes {
			wg.Go(func() {
				for {
					mu.Lock()
					done := total >= n
					mu.Unlock()
					if done || time.Now().After(deadline) {
						return
					}
					r, err := nd.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: nd.name, MaxTasks: 7})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, task := range r.GetTasks() {
						if task.GetAttempt() != attempt {
							t.Errorf("%s got attempt %d of %s, want %d", nd.name, task.GetAttempt(), task.GetActivityId(), attempt)
						}
						got[task.GetActivityId()] = append(got[task.GetActivityId()], task)
						total++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if total != n {
			t.Fatalf("attempt %d: %d handed out within %s, want %d", attempt, total, hangAfter, n)
		}
		for _, id := range ids {
			if len(got[id]) != 1 {
				t.Fatalf("attempt %d of activity %s handed out %d times, want once", attempt, id, len(got[id]))
			}
		}
		return got
	}
	tasks := race(1)

	// Every attempt fails at one instant: the n retries fall due together,
	// a second later.
	for i, id := range ids {
		e := nodes[i%len(nodes)].e
		if _, err := e.FailActivityTask(context.Background(), &durablev1.FailActivityRequest{
			TaskToken: tasks[id][0].GetTaskToken(), Failure: &durablev1.Failure{Type: "Boom", Message: "retry me"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Second)
	race(2)

	// The n leases were taken at one instant and expire at one: the three
	// nodes fire the timeouts at once (each poll fires what is due first),
	// and each lease times out once, so the next attempt is the third.
	clock.Advance(time.Minute + time.Second)
	race(3)
	d, err := nodes[1].e.DescribeWorkflow(context.Background(), &durablev1.DescribeWorkflowRequest{WorkflowId: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range d.GetPendingActivities() {
		if len(p.GetAttempts()) != 3 || p.GetAttempts()[1].GetFailure().GetType() != string(engine.TimeoutStartToClose) {
			t.Errorf("activity %s: attempts %v, want three, the second timed out", p.GetActivityId(), p.GetAttempts())
		}
	}
}

// completeWorkflow completes workflow wf's next task through e with
// CompleteWorkflow.
func completeWorkflow(t *testing.T, e *engine.Engine) {
	t.Helper()
	wt := pollWorkflowOn(t, e)
	if _, err := e.CompleteWorkflowTask(context.Background(), &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{
		{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW, Result: []byte("done")},
	}}); err != nil {
		t.Fatal(err)
	}
}

// TestSharedNodesWakeACallerWaitingOnOneForACloseThroughAnother: a
// describe waiting for the close of a workflow on node b (as Run.Get does)
// answers as soon as node a closes it, not at its poll timeout.
func TestSharedNodesWakeACallerWaitingOnOneForACloseThroughAnother(t *testing.T) {
	t.Parallel()
	nodes := sharedNodes(t, 2, engine.Options{PollTimeout: 10 * hangAfter})
	a, b := nodes[0].e, nodes[1].e
	if _, err := a.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{WorkflowId: "wf", WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	got := make(chan *durablev1.DescribeWorkflowResponse, 1)
	go func() {
		d, err := b.DescribeWorkflow(context.Background(), &durablev1.DescribeWorkflowRequest{WorkflowId: "wf", WaitForClose: true, WorkflowOnly: true})
		if err != nil {
			t.Error(err)
		}
		got <- d
	}()
	waitUntil(t, "the caller to wait on b", func() bool { return b.CloseWaiters("wf") == 1 })
	completeWorkflow(t, a)
	select {
	case d := <-got:
		if st := d.GetWorkflow().GetStatus(); st != durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED {
			t.Fatalf("b answered with status %v, want completed", st)
		}
	case <-time.After(hangAfter):
		t.Fatalf("b's caller not woken within %s of the close through a", hangAfter)
	}
}

// TestSharedNodesShowAWatcherOnOneTheChangesMadeThroughAnother: a watcher
// on node b gets, after its snapshot, the workflow started and the
// activity scheduled, leased and completed through node a, and the
// activity's removal.
func TestSharedNodesShowAWatcherOnOneTheChangesMadeThroughAnother(t *testing.T) {
	t.Parallel()
	nodes := sharedNodes(t, 2, engine.Options{})
	a, b := nodes[0].e, nodes[1].e
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan *durablev1.WatchEvent, 1000)
	go b.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
		events <- ev
		return nil
	})
	// until reads events until one satisfies ok.
	until := func(what string, ok func(*durablev1.WatchEvent) bool) {
		t.Helper()
		deadline := time.After(hangAfter)
		for {
			select {
			case ev := <-events:
				if ok(ev) {
					return
				}
			case <-deadline:
				t.Fatalf("b's watcher did not see %s within %s", what, hangAfter)
			}
		}
	}
	until("the end of its snapshot", func(ev *durablev1.WatchEvent) bool {
		return ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE
	})
	scheduleActivities(t, a, "wf", nil, "1")
	until("the workflow and its activity scheduled", func(ev *durablev1.WatchEvent) bool {
		for _, in := range ev.GetActivities() {
			if in.GetWorkflowId() == "wf" && in.GetState() == durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED {
				return true
			}
		}
		return false
	})
	r, err := a.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "a"})
	if err != nil || len(r.GetTasks()) != 1 {
		t.Fatalf("poll on a: %v, %v", r, err)
	}
	until("the activity started", func(ev *durablev1.WatchEvent) bool {
		for _, in := range ev.GetActivities() {
			if in.GetWorkflowId() == "wf" && in.GetState() == durablev1.ActivityState_ACTIVITY_STATE_STARTED {
				return true
			}
		}
		return false
	})
	if _, err := a.CompleteActivityTask(context.Background(), &durablev1.CompleteActivityTaskRequest{TaskToken: r.GetTasks()[0].GetTaskToken()}); err != nil {
		t.Fatal(err)
	}
	until("the activity removed", func(ev *durablev1.WatchEvent) bool {
		for _, ref := range ev.GetRemoved() {
			if ref.GetWorkflowId() == "wf" && ref.GetActivityId() == "1" {
				return true
			}
		}
		return false
	})
}

// TestSharedNodesApplyAnOverrideSetThroughOneOnAnother: an override set
// through node a is listed by node b, shown in force on b's describe, and
// decides b's next failure: max_attempts 1 dead-letters at once.
func TestSharedNodesApplyAnOverrideSetThroughOneOnAnother(t *testing.T) {
	t.Parallel()
	nodes := sharedNodes(t, 2, engine.Options{})
	a, b := nodes[0].e, nodes[1].e
	scheduleActivities(t, a, "wf", nil, "1")
	one := int32(1)
	if _, err := a.SetPolicyOverride(context.Background(), engine.Actor{Principal: "ops"}, &durablev1.SetPolicyOverrideRequest{
		ActivityType: "Charge", Patch: &durablev1.OptionsPatch{MaxAttempts: &one}, Reason: "stop retrying",
	}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "b to list the override", func() bool {
		l, err := b.ListPolicyOverrides(context.Background(), &durablev1.ListPolicyOverridesRequest{})
		return err == nil && len(l.GetOverrides()) == 1
	})
	d, err := b.DescribeWorkflow(context.Background(), &durablev1.DescribeWorkflowRequest{WorkflowId: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if p := d.GetPendingActivities(); len(p) != 1 || p[0].GetMaxAttempts() != 1 {
		t.Fatalf("b describes %v, want max_attempts 1 in force", p)
	}
	r, err := b.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "b"})
	if err != nil || len(r.GetTasks()) != 1 {
		t.Fatalf("poll on b: %v, %v", r, err)
	}
	if _, err := b.FailActivityTask(context.Background(), &durablev1.FailActivityRequest{TaskToken: r.GetTasks()[0].GetTaskToken(), Failure: &durablev1.Failure{Type: "Boom"}}); err != nil {
		t.Fatal(err)
	}
	d, err = b.DescribeWorkflow(context.Background(), &durablev1.DescribeWorkflowRequest{WorkflowId: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if p := d.GetPendingActivities(); len(p) != 1 || p[0].GetState() != durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED {
		t.Fatalf("after one failure on b: %v, want dead-lettered by the override", p)
	}
}

// TestSharedNodesRetryTheLeasesAndFireTheTimersOfANodeThatStopped: node a
// leases an attempt and sets a workflow timer, then its store goes away
// under it (as when the process dies): node b times the lease out and
// hands out the next attempt, and fires the timer, each once.
func TestSharedNodesRetryTheLeasesAndFireTheTimersOfANodeThatStopped(t *testing.T) {
	t.Parallel()
	nodes := sharedNodes(t, 2, engine.Options{SharedSweep: 100 * time.Millisecond, PollTimeout: hangAfter})
	a, b := nodes[0], nodes[1].e
	ctx := context.Background()
	scheduleActivities(t, a.e, "wf", &durablev1.ActivityOptions{
		StartToCloseTimeout: dur(time.Second),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 10, Backoff: 1, MaxAttempts: 5},
	}, "1")
	r, err := a.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "a"})
	if err != nil || len(r.GetTasks()) != 1 {
		t.Fatalf("poll on a: %v, %v", r, err)
	}
	if _, err := a.e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "sleeper", WorkflowType: "W", TaskQueue: "t"}); err != nil {
		t.Fatal(err)
	}
	wt, err := a.e.PollWorkflowTask(now(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "t", Identity: "a"})
	if err != nil || len(wt.GetTaskToken()) == 0 {
		t.Fatalf("workflow task on a: %v, %v", wt, err)
	}
	if _, err := a.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_START_TIMER, TimerId: "nap", TimerDuration: dur(time.Second),
	}}}); err != nil {
		t.Fatal(err)
	}
	a.store.Close() // a is gone: its engine runs on, but reaches nothing

	pollCtx, cancel := context.WithTimeout(ctx, hangAfter)
	defer cancel()
	r, err = b.PollActivityTask(pollCtx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "b"})
	if err != nil || len(r.GetTasks()) != 1 {
		t.Fatalf("b's poll: %v, %v; want the second attempt", r, err)
	}
	if got := r.GetTasks()[0].GetAttempt(); got != 2 {
		t.Fatalf("b got attempt %d, want 2: the lease a left timed out once", got)
	}
	wt, err = b.PollWorkflowTask(pollCtx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "t", Identity: "b"})
	if err != nil || len(wt.GetTaskToken()) == 0 {
		t.Fatalf("b's workflow poll: %v, %v; want the task after the timer fired", wt, err)
	}
	h, err := b.GetWorkflowHistory(ctx, &durablev1.GetWorkflowHistoryRequest{WorkflowId: "sleeper"})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(h.GetEvents(), durablev1.EventType_EVENT_TYPE_TIMER_FIRED); n != 1 {
		t.Fatalf("sleeper's history has %d TimerFired, want 1", n)
	}
}

// TestSharedNodesSendTheWholeHistoryWhenAnotherNodeHandledTheWorkflowSince:
// a sticky session's mark on node a is not trusted once node b has handed
// out a task of the workflow: a's next task for the session carries the
// whole history, since the worker's cache may not end where a's mark says.
func TestSharedNodesSendTheWholeHistoryWhenAnotherNodeHandledTheWorkflowSince(t *testing.T) {
	t.Parallel()
	nodes := sharedNodes(t, 2, engine.Options{})
	a, b := nodes[0].e, nodes[1].e
	ctx := context.Background()
	poll := func(e *engine.Engine) *durablev1.PollWorkflowTaskResponse {
		t.Helper()
		r, err := e.PollWorkflowTask(now(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w", StickySession: "s1"})
		if err != nil || len(r.GetTaskToken()) == 0 {
			t.Fatalf("workflow poll: %v, %v", r, err)
		}
		return r
	}
	timer := func(e *engine.Engine, r *durablev1.PollWorkflowTaskResponse, id string) {
		t.Helper()
		if _, err := e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: r.GetTaskToken(), Commands: []*durablev1.Command{{
			Type: durablev1.CommandType_COMMAND_TYPE_START_TIMER, TimerId: id, TimerDuration: dur(time.Millisecond),
		}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "wf", WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	first := poll(a) // a marks s1
	timer(a, first, "t1")
	second := pollWorkflowAfterTimer(t, b, "s1") // b hands the next task to the same session
	timer(b, second, "t2")
	third := pollWorkflowAfterTimer(t, a, "s1")
	if third.GetHistoryStartEventId() > 1 || third.GetHistory()[0].GetEventId() != 1 {
		t.Fatalf("a's task for s1 starts at event %d (history_start_event_id %d), want the whole history",
			third.GetHistory()[0].GetEventId(), third.GetHistoryStartEventId())
	}
}

// pollWorkflowAfterTimer waits for the workflow task a fired timer
// schedules and leases it through e for session.
func pollWorkflowAfterTimer(t *testing.T, e *engine.Engine, session string) *durablev1.PollWorkflowTaskResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangAfter)
	defer cancel()
	r, err := e.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w", StickySession: session})
	if err != nil || len(r.GetTaskToken()) == 0 {
		t.Fatalf("workflow poll for %s: %v, %v", session, r, err)
	}
	return r
}

// redriveOnA dead-letters 30 activities through node a of nodes (on clock),
// starts a redrive operation of them there at 10 a second, and returns the
// harnesses of the nodes, the workflows and the operation once 11 letters
// have gone out.
func redriveOnA(t *testing.T, nodes []*node, clock *engine.FakeClock) ([]*harness, []string, *durablev1.Operation) {
	t.Helper()
	var hs []*harness
	for _, n := range nodes {
		hs = append(hs, &harness{t: t, e: n.e, clock: clock})
	}
	wfs := hs[0].deadLetters("carry", 30, "X")
	op := hs[0].startOp(&durablev1.RedriveDeadLettersRequest{Rate: 10, Reason: "INC-9"})
	clock.Advance(time.Second)
	hs[0].waitOp(op.GetId(), "11 released", released(11))
	return hs, wfs, op
}

// checkRedrivenOnce checks that operation op, seen through h, completed
// with every letter of wfs released once, and that its audit record says so.
func checkRedrivenOnce(t *testing.T, h *harness, op *durablev1.Operation, wfs []string) {
	t.Helper()
	got := h.waitOpAdvancing(op.GetId(), "completed", finished)
	if got.GetState() != opCompleted || got.GetReleased() != int64(len(wfs)) || got.GetSkipped() != 0 || got.GetLeft() != 0 {
		t.Fatalf("finished %v, want completed with all %d released", got, len(wfs))
	}
	for _, wf := range wfs {
		if n := len(h.redriven(wf)); n != 1 {
			t.Errorf("%s redriven %d times, want once", wf, n)
		}
	}
	if r := h.audit()[0]; r.GetCount() != int64(len(wfs)) || !r.GetDone() {
		t.Errorf("audit record = %v, want %d and done", r, len(wfs))
	}
}

// TestSharedNodesCarryOnARedriveOperationOfANodeThatStopped: a redrive
// operation goes on through another node once the node that ran it is gone,
// from the letters it had released, each letter released once.
func TestSharedNodesCarryOnARedriveOperationOfANodeThatStopped(t *testing.T) {
	t.Parallel()
	clock := engine.NewFakeClock(t0)
	nodes := sharedNodes(t, 2, engine.Options{Clock: clock})
	hs, wfs, op := redriveOnA(t, nodes, clock)
	if op.GetNode() != "a" {
		t.Fatalf("the operation started on a names node %q", op.GetNode())
	}
	nodes[0].e.Close()
	nodes[0].store.Close() // a is gone; b sees it gone at its next look
	checkRedrivenOnce(t, hs[1], op, wfs)
	if got := hs[1].op(op.GetId()); got.GetNode() != "b" {
		t.Errorf("the operation b finished names node %q", got.GetNode())
	}
}

// TestSharedNodesRunAnOperationOnlyOnTheNodeItsRecordNames: a node that
// finds at a release that the record names another node (which took the
// operation over while this one looked dead) leaves the operation to it and
// says so; the other node runs it to the end, each letter released once.
func TestSharedNodesRunAnOperationOnlyOnTheNodeItsRecordNames(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	clock := engine.NewFakeClock(t0)
	nodes := sharedNodes(t, 3, engine.Options{Clock: clock, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	hs, wfs, op := redriveOnA(t, nodes, clock)
	// What b's takeover would write, had a paused past its liveness.
	var seq int64
	if _, err := fmt.Sscanf(op.GetId(), "op-%d", &seq); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].store.Update(func(tx engine.Tx) error {
		rec, err := tx.GetOperation(seq)
		if err != nil {
			return err
		}
		rec.Node = "b"
		return tx.PutOperation(rec)
	}); err != nil {
		t.Fatal(err)
	}
	// c stopping makes b look at the operations again.
	nodes[2].e.Close()
	nodes[2].store.Close()
	checkRedrivenOnce(t, hs[1], op, wfs)
	for _, want := range []string{
		fmt.Sprintf(`msg="a redrive operation this node ran was taken over by another node; leaving it to that node" operation_id=%s node=a taken_by=b`, op.GetId()),
		fmt.Sprintf(`msg="now running a redrive operation" operation_id=%s node=b from=b`, op.GetId()),
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logs.String())
		}
	}
}

// TestSharedNodesShowAWatcherOnOneTheOperationsRunThroughAnother: a watcher
// on node b sees a redrive operation started through node a, its progress,
// and its end, and the audit records of its start and of a policy override
// set through a.
func TestSharedNodesShowAWatcherOnOneTheOperationsRunThroughAnother(t *testing.T) {
	t.Parallel()
	clock := engine.NewFakeClock(t0)
	nodes := sharedNodes(t, 2, engine.Options{Clock: clock})
	a := &harness{t: t, e: nodes[0].e, clock: clock}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ops := make(chan *durablev1.Operation, 1000)
	var mu sync.Mutex
	var audits []*durablev1.AuditRecord
	snapshotDone := make(chan struct{})
	go nodes[1].e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
		if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
			close(snapshotDone)
		}
		for _, op := range ev.GetOperations() {
			ops <- op
		}
		mu.Lock()
		audits = append(audits, ev.GetAuditRecords()...)
		mu.Unlock()
		return nil
	})
	<-snapshotDone
	a.deadLetters("seen", 5, "X")
	op := a.startOp(&durablev1.RedriveDeadLettersRequest{Rate: 10, Reason: "INC-8"})
	// until reads the operations b's watcher got until one satisfies ok,
	// moving the clock on while none comes.
	until := func(what string, ok func(*durablev1.Operation) bool) {
		t.Helper()
		deadline := time.After(hangAfter)
		for {
			select {
			case got := <-ops:
				if got.GetId() == op.GetId() && ok(got) {
					return
				}
			case <-time.After(100 * time.Millisecond):
				clock.Advance(time.Second)
			case <-deadline:
				t.Fatalf("b's watcher did not see %s of %s within %s", what, op.GetId(), hangAfter)
			}
		}
	}
	until("its start", func(got *durablev1.Operation) bool { return got.GetNode() == "a" && got.GetMatched() == 5 })
	until("its end", func(got *durablev1.Operation) bool { return got.GetState() == opCompleted && got.GetReleased() == 5 })

	if _, err := a.e.SetPolicyOverride(ctx, alice, &durablev1.SetPolicyOverrideRequest{ActivityType: "Charge",
		Patch: &durablev1.OptionsPatch{StartToCloseTimeout: dur(time.Minute)}, Reason: "INC-8 slow down"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "b's watcher to get the audit records of the start and the override", func() bool {
		mu.Lock()
		defer mu.Unlock()
		var start, override bool
		for _, r := range audits {
			start = start || r.GetOperationId() == op.GetId() && r.GetRpc() == "RedriveDeadLetters"
			override = override || r.GetRpc() == "SetPolicyOverride" && r.GetReason() == "INC-8 slow down"
		}
		return start && override
	})
}

// TestSharedNodesListTheWorkersPollingAnother: a worker that polls only
// node a is listed by node b, parked while its poll is open and not once it
// ended, and b does not call the queue unpolled when work is ready on it.
func TestSharedNodesListTheWorkersPollingAnother(t *testing.T) {
	t.Parallel()
	nodes := sharedNodes(t, 2, engine.Options{PollTimeout: hangAfter})
	a, b := nodes[0].e, nodes[1].e
	ctx, cancel := context.WithCancel(context.Background())
	polled := make(chan error, 1)
	go func() {
		_, err := a.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "worker-on-a"})
		polled <- err
	}()
	// onB returns queue q as b lists it, and the worker in it (nil when
	// b does not list it).
	onB := func() (*durablev1.TaskQueue, *durablev1.Poller) {
		r, err := b.ListTaskQueues(context.Background(), &durablev1.ListTaskQueuesRequest{TaskQueue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range r.GetTaskQueues() {
			for _, p := range q.GetPollers() {
				if p.GetIdentity() == "worker-on-a" && p.GetKind() == durablev1.TaskKind_TASK_KIND_ACTIVITY {
					return q, p
				}
			}
		}
		return nil, nil
	}
	waitUntil(t, "b to list the worker parked on a", func() bool {
		_, p := onB()
		return p != nil && p.GetParked()
	})
	cancel()
	<-polled
	waitUntil(t, "b to list the worker no longer parked", func() bool {
		_, p := onB()
		return p != nil && !p.GetParked()
	})
	// An activity ready on q: the worker polled a within the minute, so
	// b counts the queue as served, as a does.
	scheduleActivities(t, a, "wf", nil, "1")
	waitUntil(t, "b to see the activity ready", func() bool {
		q, _ := onB()
		return q.GetActivityTasks().GetReady() == 1
	})
	if q, _ := onB(); q.GetActivityTasks().GetStalled() || q.GetStalled() {
		t.Fatalf("b calls q unpolled: %v", q)
	}
}
