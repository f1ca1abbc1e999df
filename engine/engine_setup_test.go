package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type harness struct {
	t     *testing.T
	e     *engine.Engine
	clock *engine.FakeClock
	store engine.Store
}

// setup returns an engine on an empty store (in-memory Badger, or a fresh
// PostgreSQL database when DURABLE_TEST_STORE=postgres) and a fake clock at t0, with
// jitter switched off unless opts says otherwise.
func setup(t *testing.T, opts engine.Options) *harness {
	t.Helper()
	return setupOn(t, opts, nil)
}

// setupOn is setup with the store seen through wrap, when given.
func setupOn(t *testing.T, opts engine.Options, wrap func(engine.Store) engine.Store) *harness {
	t.Helper()
	st := openStore(t)
	if wrap != nil {
		st = wrap(st)
	}
	clock := engine.NewFakeClock(t0)
	opts.Clock = clock
	if opts.Jitter == nil {
		opts.Jitter = func(d time.Duration) time.Duration { return d }
	}
	e, err := engine.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	return &harness{t: t, e: e, clock: clock, store: st}
}

// now is a context that is already done: polls look once and never wait.
func now() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// startWithActivity starts workflow wf and completes its first workflow task
// with one ScheduleActivity command.
func (h *harness) startWithActivity(wf string, opts *durablev1.ActivityOptions) {
	h.t.Helper()
	ctx := context.Background()
	h.start(wf, "Flaky")
	wt := h.pollWorkflow()
	if wt == nil {
		h.t.Fatal("no workflow task after start")
	}
	_, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
		Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "1", ActivityType: "Charge", ActivityOptions: opts,
	}}})
	if err != nil {
		h.t.Fatal(err)
	}
}

// start starts a workflow of type typ on queue "q".
func (h *harness) start(wf, typ string) {
	h.t.Helper()
	if _, err := h.e.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: typ, TaskQueue: "q"}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) pollWorkflow() *durablev1.PollWorkflowTaskResponse {
	h.t.Helper()
	r, err := h.e.PollWorkflowTask(now(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(r.GetTaskToken()) == 0 {
		return nil
	}
	return r
}

func (h *harness) pollActivity() *durablev1.ActivityTask {
	h.t.Helper()
	r, err := h.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "worker-1"})
	if err != nil {
		h.t.Fatal(err)
	}
	if len(r.GetTasks()) == 0 {
		return nil
	}
	return r.GetTasks()[0]
}

// awaitActivity polls queue "q" until a task comes, for up to 10 s.
func (h *harness) awaitActivity() *durablev1.ActivityTask {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := h.e.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "worker-1"})
	if err != nil || len(r.GetTasks()) == 0 {
		h.t.Fatalf("no activity task within 10 s: %v", err)
	}
	return r.GetTasks()[0]
}

func (h *harness) fail(task *durablev1.ActivityTask, f *durablev1.Failure) {
	h.t.Helper()
	if _, err := h.e.FailActivityTask(context.Background(), &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: f}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) describe(wf string) *durablev1.DescribeWorkflowResponse {
	h.t.Helper()
	d, err := h.e.DescribeWorkflow(context.Background(), &durablev1.DescribeWorkflowRequest{WorkflowId: wf})
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

func (h *harness) history(wf string) []*durablev1.HistoryEvent {
	h.t.Helper()
	r, err := h.e.GetWorkflowHistory(context.Background(), &durablev1.GetWorkflowHistoryRequest{WorkflowId: wf})
	if err != nil {
		h.t.Fatal(err)
	}
	return r.GetEvents()
}

func eventTypes(events []*durablev1.HistoryEvent) []durablev1.EventType {
	var out []durablev1.EventType
	for _, e := range events {
		out = append(out, e.GetType())
	}
	return out
}

func count(events []*durablev1.HistoryEvent, typ durablev1.EventType) int {
	n := 0
	for _, e := range events {
		if e.GetType() == typ {
			n++
		}
	}
	return n
}

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }
