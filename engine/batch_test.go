package engine_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

// TestConcurrentTransitionsFailAlone: completions racing stale reports of the
// same activities land in shared batches; every live completion succeeds,
// every stale one is refused, and nothing of one leaks into another.
func TestConcurrentTransitionsFailAlone(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	ctx := context.Background()
	const n = 64
	h.start("wf", "Fan")
	var cmds []*durablev1.Command
	for i := range n {
		cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: strconv.Itoa(i), ActivityType: "Work"})
	}
	if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: h.pollWorkflow().GetTaskToken(), Commands: cmds}); err != nil {
		t.Fatal(err)
	}
	r, err := h.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", MaxTasks: n})
	if err != nil || len(r.GetTasks()) != n {
		t.Fatalf("poll: %d tasks, %v", len(r.GetTasks()), err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i, task := range r.GetTasks() {
		wg.Go(func() {
			_, errs[2*i] = h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken(), Result: []byte("1")})
		})
		wg.Go(func() {
			stale := &durablev1.TaskToken{WorkflowId: "wf", ActivityId: task.GetActivityId(), Attempt: 1, LeaseId: 1 << 40}
			_, errs[2*i+1] = h.e.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: mustMarshal(t, stale), Failure: &durablev1.Failure{Type: "X"}})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[2*i] != nil {
			t.Errorf("completion %d: %v", i, errs[2*i])
		}
		if !errors.Is(errs[2*i+1], engine.ErrStaleTask) {
			t.Errorf("stale failure %d: %v, want ErrStaleTask", i, errs[2*i+1])
		}
	}
	if got := count(h.history("wf"), durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED); got != n {
		t.Errorf("%d completions in history, want %d", got, n)
	}
	if pa := h.describe("wf").GetPendingActivities(); len(pa) != 0 {
		t.Errorf("%d activities still pending", len(pa))
	}
}

func mustMarshal(t *testing.T, tok *durablev1.TaskToken) []byte {
	t.Helper()
	b, err := proto.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
