package worker

import (
	"testing"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/workflow"
)

// execution returns a running execution of a workflow that waits forever.
func execution(t *testing.T) *workflow.Execution {
	t.Helper()
	def, err := workflow.NewDefinition(func(ctx workflow.Context) error {
		workflow.Await(ctx, func() bool { return false })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	x, res := def.Start(workflow.TaskParams{WorkflowID: "w", History: []*durablev1.HistoryEvent{
		{EventId: 1, Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED},
		{EventId: 2, Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED},
		{EventId: 3, Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED},
	}})
	if res.Failure != nil || !x.Reusable() {
		t.Fatalf("start = %v, reusable %v", res.Failure, x.Reusable())
	}
	t.Cleanup(x.Close)
	return x
}

func TestWorkflowCacheEvictsTheLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	c := newWorkflowCache(2)
	xa, xb, xc := execution(t), execution(t), execution(t)
	for id, x := range map[string]*workflow.Execution{"a": xa, "b": xb} {
		if got := c.take(id); got != nil {
			t.Fatalf("take(%s) of an empty cache = %v", id, got)
		}
		c.put(id, x)
	}
	c.put("a", c.take("a")) // a is now the most recently used
	c.take("c")
	c.put("c", xc)
	if c.len() != 2 {
		t.Fatalf("cache holds %d, want 2", c.len())
	}
	if xb.Reusable() {
		t.Error("b, the least recently used, was not evicted and closed")
	}
	if got := c.take("b"); got != nil {
		t.Errorf("take(b) after its eviction = %v, want nil", got)
	}
	c.drop("b")
	if got := c.take("a"); got != xa || !xa.Reusable() {
		t.Errorf("take(a) = %v (reusable %v), want a's execution", got, xa.Reusable())
	}
	c.drop("a")
	if got := c.take("a"); got != nil {
		t.Errorf("take(a) after a drop = %v, want nil", got)
	}
	c.drop("a")
	c.clear()
	if c.len() != 0 || xc.Reusable() {
		t.Errorf("after clear: %d kept, c reusable %v", c.len(), xc.Reusable())
	}
}

func TestWorkflowCacheTakeWaitsForTheRunningTask(t *testing.T) {
	t.Parallel()
	c := newWorkflowCache(10)
	x := execution(t)
	c.take("w")
	got := make(chan *workflow.Execution)
	go func() { got <- c.take("w") }()
	select {
	case g := <-got:
		t.Fatalf("a second take returned %v while the first task ran", g)
	case <-time.After(20 * time.Millisecond):
	}
	c.put("w", x)
	select {
	case g := <-got:
		if g != x {
			t.Fatalf("the waiting take got %v, want the execution the first task kept", g)
		}
	case <-time.After(testWait):
		t.Fatal("the waiting take did not return after the put")
	}
	c.drop("w")
}

const testWait = 10 * time.Second
