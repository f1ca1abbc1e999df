package engine_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestDescribeWorkflowOnlyLeavesOutItsActivities: with workflow_only,
// describe returns the workflow as a plain describe does, without its
// pending or finished activities.
func TestDescribeWorkflowOnlyLeavesOutItsActivities(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.startWithActivity("wf", nil)
	only := func() *durablev1.DescribeWorkflowResponse {
		t.Helper()
		d, err := h.e.DescribeWorkflow(context.Background(), &durablev1.DescribeWorkflowRequest{WorkflowId: "wf", WorkflowOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	check := func(when string) {
		t.Helper()
		full, got := h.describe("wf"), only()
		if len(full.GetPendingActivities())+len(full.GetFinishedActivities()) != 1 {
			t.Fatalf("%s: a plain describe shows %d pending and %d finished activities, want one in all",
				when, len(full.GetPendingActivities()), len(full.GetFinishedActivities()))
		}
		if n, m := len(got.GetPendingActivities()), len(got.GetFinishedActivities()); n != 0 || m != 0 {
			t.Errorf("%s: workflow_only shows %d pending and %d finished activities, want none", when, n, m)
		}
		if !proto.Equal(got.GetWorkflow(), full.GetWorkflow()) {
			t.Errorf("%s: workflow_only shows the workflow as %v, a plain describe as %v", when, got.GetWorkflow(), full.GetWorkflow())
		}
	}
	check("pending")
	task := h.pollActivity()
	if task == nil {
		t.Fatal("the activity was not handed out")
	}
	h.complete(task)
	check("finished")
}
