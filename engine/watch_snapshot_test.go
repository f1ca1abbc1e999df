package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// watchModel is what a consumer of Watch knows: it applies each event as a
// console does, replacing its state with the snapshot at SNAPSHOT_DONE.
type watchModel struct {
	activities map[string]*durablev1.PendingActivity
	workflows  map[string]*durablev1.WorkflowInfo
	stageActs  []*durablev1.PendingActivity
	stageWfs   []*durablev1.WorkflowInfo
	synced     bool
}

func activityKey(a *durablev1.PendingActivity) string {
	return a.GetWorkflowId() + "/" + a.GetActivityId()
}

func (m *watchModel) apply(ev *durablev1.WatchEvent) {
	switch ev.GetKind() {
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT:
		m.stageActs = append(m.stageActs, ev.GetActivities()...)
		m.stageWfs = append(m.stageWfs, ev.GetWorkflows()...)
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE:
		m.activities, m.workflows = map[string]*durablev1.PendingActivity{}, map[string]*durablev1.WorkflowInfo{}
		for _, a := range m.stageActs {
			m.activities[activityKey(a)] = a
		}
		for _, w := range m.stageWfs {
			m.workflows[w.GetWorkflowId()] = w
		}
		m.stageActs, m.stageWfs, m.synced = nil, nil, true
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT:
		for _, a := range ev.GetActivities() {
			m.activities[activityKey(a)] = a
		}
		for _, w := range ev.GetWorkflows() {
			m.workflows[w.GetWorkflowId()] = w
		}
	case durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE:
		for _, r := range ev.GetRemoved() {
			delete(m.activities, r.GetWorkflowId()+"/"+r.GetActivityId())
		}
	}
}

// diff lists where m differs from want, at most a few lines.
func (m *watchModel) diff(want *watchModel) []string {
	var out []string
	for k, a := range want.activities {
		if got, ok := m.activities[k]; !ok || !proto.Equal(got, a) {
			out = append(out, fmt.Sprintf("activity %s: got %v, want %v", k, got, a))
		}
	}
	for k := range m.activities {
		if _, ok := want.activities[k]; !ok {
			out = append(out, "activity "+k+" is gone, still shown")
		}
	}
	for k, w := range want.workflows {
		if got, ok := m.workflows[k]; !ok || !proto.Equal(got, w) {
			out = append(out, fmt.Sprintf("workflow %s: got %v, want %v", k, got, w))
		}
	}
	return out[:min(len(out), 5)]
}

// snapshotOf opens a watch, takes its snapshot and closes it.
func snapshotOf(t *testing.T, e *engine.Engine) *watchModel {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &watchModel{}
	err := e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
		m.apply(ev)
		if m.synced {
			cancel()
		}
		return nil
	})
	if !m.synced {
		t.Fatalf("no snapshot: %v", err)
	}
	return m
}

// TestWatchChangesRacingTheSnapshotConverge: watchers open one after another
// while workers start workflows, schedule, start, fail and complete
// activities as fast as they can, so that changes commit between each
// watcher's registration and its snapshot read, and during its send. Each
// watcher, applying its snapshot and then every event in order, ends with
// exactly what a snapshot taken after the work stopped shows.
func TestWatchChangesRacingTheSnapshotConverge(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	work, stopWork := context.WithCancel(ctx)
	errs := make(chan error, 4)
	var workers sync.WaitGroup
	for n := range 4 {
		workers.Go(func() {
			if err := raceWorkload(work, h.e, n); !errors.Is(err, context.Canceled) {
				errs <- err
			}
		})
	}

	const watchers = 20
	models := make([]*watchModel, watchers)
	ended := make([]chan error, watchers)
	events := make([]chan *durablev1.WatchEvent, watchers)
	for i := range watchers {
		models[i] = &watchModel{}
		ended[i] = make(chan error, 1)
		events[i] = make(chan *durablev1.WatchEvent, 1<<16)
		go func() {
			ended[i] <- h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
				events[i] <- ev
				return nil
			})
		}()
		// Let some work commit before the next one opens.
		waitCommits(t, 5, errs)
	}
	waitCommits(t, 50, errs)
	stopWork()
	workers.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("workload: %v", err)
	}
	// A last change that every watcher sees after all the others.
	h.start("the-end", "End")
	for i := range watchers {
		deadline := time.After(30 * time.Second)
		for models[i].workflows["the-end"] == nil {
			select {
			case ev := <-events[i]:
				models[i].apply(ev)
			case err := <-ended[i]:
				t.Fatalf("watcher %d ended: %v", i, err)
			case <-deadline:
				t.Fatalf("watcher %d did not see the last change within 30s", i)
			}
		}
	}
	want := snapshotOf(t, h.e)
	if len(want.activities) == 0 || len(want.workflows) < 10 {
		t.Fatalf("the workload left %d activities and %d workflows: too little to race", len(want.activities), len(want.workflows))
	}
	for i, m := range models {
		if d := m.diff(want); len(d) > 0 {
			t.Errorf("watcher %d differs from the store:\n%v", i, d)
		}
	}
}

// TestWatchCatchUpFollowsTheOrderOfChanges: an activity pending in a
// watcher's snapshot completes while the snapshot streams, and a workflow
// starts after that. When the watcher shows the workflow, it no longer
// shows the activity: what a watcher catches up on comes in the order it
// changed, as its live events do, so a reader that waits for its own last
// change sees everything before it. (The catch-up once sent every upsert
// before every removal, and the racing test above, which waits for such a
// last change, failed now and then.)
func TestWatchCatchUpFollowsTheOrderOfChanges(t *testing.T) {
	t.Parallel()
	h, st := setupPausing(t)
	h.startWithActivity("done-early", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	at := "running workflows"
	st.pauseIn.Store(&at)
	events := make(chan *durablev1.WatchEvent, 1<<10)
	go h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
		select {
		case events <- ev:
		case <-ctx.Done():
		}
		return nil
	})
	select {
	case <-st.paused:
	case <-time.After(time.Minute):
		t.Fatal("the snapshot reader did not reach the running workflows within a minute")
	}
	// The view is fixed and the watcher registered: both changes go to the
	// catch-up log.
	task := h.pollActivity()
	if task == nil {
		t.Fatal("no activity task")
	}
	h.complete(task)
	h.start("the-end", "End")
	st.resume <- struct{}{}
	m := &watchModel{}
	deadline := time.After(time.Minute)
	for m.workflows["the-end"] == nil {
		select {
		case ev := <-events:
			m.apply(ev)
		case <-deadline:
			t.Fatal("the watcher did not show the workflow started last within a minute")
		}
	}
	if a := m.activities["done-early/1"]; a != nil {
		t.Errorf("the watcher shows the workflow started last, and still the activity completed before it: %v", a)
	}
}

// raceProgress gets a value each time a workload finishes one workflow's
// round of changes.
var raceProgress = make(chan struct{}, 1<<16)

// waitCommits waits until the workloads finished n more rounds, or one of
// them failed.
func waitCommits(t *testing.T, n int, errs <-chan error) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for range n {
		select {
		case <-raceProgress:
		case err := <-errs:
			t.Fatalf("workload: %v", err)
		case <-deadline:
			t.Fatal("the workload made no progress within 30s")
		}
	}
}

// raceWorkload starts workflows on its own queue, one after another, and
// for each schedules two activities, fails the first (a dead letter or a
// retry) and completes the second, except that every third workflow leaves
// its second activity scheduled; until ctx ends.
func raceWorkload(ctx context.Context, e *engine.Engine, n int) error {
	queue := fmt.Sprintf("race-%d", n)
	poll := func() context.Context {
		c, cancel := context.WithCancel(ctx)
		cancel()
		return c
	}
	for i := 0; ctx.Err() == nil; i++ {
		wf := fmt.Sprintf("%s-%d", queue, i)
		if _, err := e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "Race", TaskQueue: queue}); err != nil {
			return err
		}
		// The tasks of workflows whose activity completed come first: they
		// have nothing more to do.
		var wt *durablev1.PollWorkflowTaskResponse
		for wt.GetWorkflowId() != wf {
			var err error
			if wt, err = e.PollWorkflowTask(poll(), &durablev1.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "w"}); err != nil {
				return err
			}
			if wt.GetWorkflowId() == "" {
				return fmt.Errorf("no workflow task for %s", wf)
			}
			if wt.GetWorkflowId() != wf {
				if _, err := e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken()}); err != nil {
					return err
				}
			}
		}
		var cmds []*durablev1.Command
		for _, id := range []string{"1", "2"} {
			// Half the first activities dead-letter when they fail, half
			// wait for a retry the fake clock never brings.
			policy := &durablev1.RetryPolicy{InitialMs: 1, MaxAttempts: int32(1 + i%2)}
			cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: id, ActivityType: "Charge",
				ActivityOptions: &durablev1.ActivityOptions{RetryPolicy: policy}})
		}
		if _, err := e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
			return err
		}
		max := int32(2)
		if i%3 == 0 {
			max = 1
		}
		r, err := e.PollActivityTask(poll(), &durablev1.PollActivityTaskRequest{TaskQueue: queue, Identity: "w", MaxTasks: max})
		if err != nil {
			return err
		}
		for _, task := range r.GetTasks() {
			if task.GetActivityId() == "1" {
				_, err = e.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: &durablev1.Failure{Type: "Flaky", Message: "try again"}})
			} else {
				_, err = e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()})
			}
			if err != nil {
				return err
			}
		}
		select {
		case raceProgress <- struct{}{}:
		default:
		}
	}
	return ctx.Err()
}

// pausingStore stops a Watch's snapshot reader in the middle of its view:
// the first scan named pauseIn (set before the watch opens) says so on
// paused and waits for resume; "activities" stops after the first 600
// activities, a chunk already handed over, the others as they begin.
type pausingStore struct {
	engine.Store
	pauseIn atomic.Pointer[string]
	paused  chan struct{}
	resume  chan struct{}
}

// pause stops the caller if scan is the one to stop in, once.
func (s *pausingStore) pause(scan string) {
	if p := s.pauseIn.Load(); p != nil && *p == scan && s.pauseIn.CompareAndSwap(p, nil) {
		s.paused <- struct{}{}
		<-s.resume
	}
}

// setupPausing is setup on a pausingStore. Should the test fail with a
// reader stopped, the reader goes on at the end, so that the engine can
// close.
func setupPausing(t *testing.T) (*harness, *pausingStore) {
	var st *pausingStore
	h := setupOn(t, engine.Options{}, func(s engine.Store) engine.Store {
		st = &pausingStore{Store: s, paused: make(chan struct{}), resume: make(chan struct{})}
		return st
	})
	t.Cleanup(func() { close(st.resume) })
	return h, st
}

func (s *pausingStore) View(fn func(engine.Tx) error) error {
	return s.Store.View(func(tx engine.Tx) error { return fn(pausingTx{Tx: tx, s: s}) })
}

type pausingTx struct {
	engine.Tx
	s *pausingStore
}

func (tx pausingTx) ScanActivities(fn func(*durablev1.ActivityRecord) bool) error {
	n := 0
	return tx.Tx.ScanActivities(func(a *durablev1.ActivityRecord) bool {
		if n++; n == 600 {
			tx.s.pause("activities")
		}
		return fn(a)
	})
}

func (tx pausingTx) RunningWorkflows(fn func(*durablev1.WorkflowRecord) bool) error {
	tx.s.pause("running workflows")
	return tx.Tx.RunningWorkflows(fn)
}

func (tx pausingTx) ClosedWorkflows(since time.Time, fn func(*durablev1.WorkflowRecord) bool) error {
	tx.s.pause("closed workflows")
	return tx.Tx.ClosedWorkflows(since, fn)
}

func (tx pausingTx) Operations(after []byte, fn func(*durablev1.OperationRecord) bool) ([]byte, error) {
	tx.s.pause("operations")
	return tx.Tx.Operations(after, fn)
}

// probeCommits starts workflow wf on queue "probe", schedules an activity
// from its first workflow task, leases the activity, completes it and then
// the workflow: each a commit, published to the watchers.
func probeCommits(ctx context.Context, e *engine.Engine, wf string) error {
	if _, err := e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "Probe", TaskQueue: "probe"}); err != nil {
		return err
	}
	wt, err := e.PollWorkflowTask(now(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "probe", Identity: "w"})
	if err != nil {
		return err
	}
	if wt.GetWorkflowId() != wf {
		return fmt.Errorf("workflow task of %q, want %s", wt.GetWorkflowId(), wf)
	}
	_, err = e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge",
		ActivityOptions: &durablev1.ActivityOptions{TaskQueue: "probe"}}}})
	if err != nil {
		return err
	}
	r, err := e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "probe", Identity: "w"})
	if err != nil {
		return err
	}
	if len(r.GetTasks()) != 1 {
		return fmt.Errorf("%d activity tasks of %s, want 1", len(r.GetTasks()), wf)
	}
	if _, err = e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: r.GetTasks()[0].GetTaskToken()}); err != nil {
		return err
	}
	if wt, err = e.PollWorkflowTask(now(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "probe", Identity: "w"}); err != nil {
		return err
	}
	if wt.GetWorkflowId() != wf {
		return fmt.Errorf("workflow task of %q after the activity, want %s", wt.GetWorkflowId(), wf)
	}
	_, err = e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW}}})
	return err
}

// TestWatchSnapshotDoesNotBlockCommits: a snapshot reader stopped in the
// middle of its view, at each place it reads (the operations, the
// activities with a chunk already sent, the running workflows, the closed
// ones) or waiting for a client that takes nothing, holds nothing a commit
// needs: a workflow starts, schedules an activity, leases and completes it
// and completes meanwhile, and once the reader goes on, the watcher shows
// all of it. A
// watch that read its snapshot under the engine's lock, as it once did,
// would hold each of those commits until the reader went on, and the test
// would wait for them in vain. (How long commits take while a crowd of
// snapshots is read is a matter of CPU, measured by BenchmarkWatchOpens'
// commit-p99-ms.)
func TestWatchSnapshotDoesNotBlockCommits(t *testing.T) {
	t.Parallel()
	h, st := setupPausing(t)
	h.scheduleMany(2000, 1000)
	if err := probeCommits(context.Background(), h.e, "before"); err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"operations", "activities", "running workflows", "closed workflows", "a client that takes nothing"} {
		ctx, cancel := context.WithCancel(context.Background())
		stuck := at == "a client that takes nothing"
		if !stuck {
			st.pauseIn.Store(&at)
		}
		client := make(chan struct{}, 1)
		events := make(chan *durablev1.WatchEvent, 1<<12)
		go h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
			if stuck {
				stuck = false
				client <- struct{}{}
				<-st.resume
			}
			select {
			case events <- ev:
			case <-ctx.Done():
			}
			return nil
		})
		select {
		case <-st.paused:
		case <-client:
		case <-time.After(time.Minute):
			t.Fatalf("the snapshot reader did not reach %s within a minute", at)
		}
		wf := "during " + at
		committed := make(chan error, 1)
		go func() { committed <- probeCommits(ctx, h.e, wf) }()
		select {
		case err := <-committed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("commits waited a minute for a snapshot reader stopped at %s", at)
		}
		st.resume <- struct{}{}
		m := &watchModel{}
		deadline := time.After(time.Minute)
		for !m.synced || m.workflows[wf].GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED || m.activities[wf+"/1"] != nil {
			select {
			case ev := <-events:
				m.apply(ev)
			case <-deadline:
				t.Fatalf("stopped at %s: the watcher did not show the commits made meanwhile within a minute", at)
			}
		}
		cancel()
		if d := m.diff(snapshotOf(t, h.e)); len(d) > 0 {
			t.Errorf("stopped at %s: the watcher differs from the store:\n%v", at, d)
		}
	}
}
