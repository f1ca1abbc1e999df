package client_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// failTypes dead-letters one activity per entry of types in workflow wf,
// each failing with that failure type.
func failTypes(t *testing.T, c *client.Client, wf string, types ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := c.Service()
	if _, err := svc.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "T", TaskQueue: wf}); err != nil {
		t.Fatal(err)
	}
	wt, err := svc.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: wf})
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*durablev1.Command
	for i := range types {
		cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: fmt.Sprint(i), ActivityType: "Charge",
			ActivityOptions: &durablev1.ActivityOptions{StartToCloseTimeout: durationpb.New(time.Minute), RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 1}}})
	}
	if _, err := svc.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
		t.Fatal(err)
	}
	for failed := 0; failed < len(types); {
		at, err := svc.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: wf, MaxTasks: int32(len(types))})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range at.GetTasks() {
			var i int
			fmt.Sscan(task.GetActivityId(), &i)
			f := &durablev1.Failure{Type: types[i], Message: "after " + task.GetActivityId() + "s"}
			if _, err := svc.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: f}); err != nil {
				t.Fatal(err)
			}
			failed++
		}
	}
}

// TestSelectionSelectsWhatTheDaemonSelects: for every selection the daemon
// can apply, the letters its filter returns are exactly those Matches
// keeps, and SelectDeadLetters returns them whether the daemon or the
// client does the selecting.
func TestSelectionSelectsWhatTheDaemonSelects(t *testing.T) {
	t.Parallel()
	addr := testdaemon.Start(t, engine.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	failTypes(t, c, "order-1", "Timeout", "HeartbeatTimeout", "Timeout")
	failTypes(t, c, "order-10", "HeartbeatTimeout", "Down")
	failTypes(t, c, "refund-1", "Timeout")
	all, err := c.ListDeadLetters(ctx, client.DeadLetterFilter{})
	if err != nil || len(all) != 6 {
		t.Fatalf("letters = %d, %v; want 6", len(all), err)
	}
	keys := func(acts []*durablev1.PendingActivity) []string {
		var out []string
		for _, a := range acts {
			out = append(out, a.GetWorkflowId()+"/"+a.GetActivityId())
		}
		slices.Sort(out)
		return out
	}
	fp := activity.Fingerprint(&durablev1.Failure{Type: "Timeout", Message: "after 2s"})
	for _, words := range []string{"", "type:Timeout", "type:HeartbeatTimeout", "act:Charge", "wf:order-1", "wf:order-1 type:Timeout",
		"fp:" + fp, "type:Timeout wf:order-1*", "queue:order-10", "attempt>=1 type:Down", "order-1"} {
		t.Run(words, func(t *testing.T) {
			sel, err := client.ParseSelection(words)
			if err != nil {
				t.Fatal(err)
			}
			var want []*durablev1.PendingActivity
			for _, a := range all {
				if sel.Matches(a) {
					want = append(want, a)
				}
			}
			if f, exact := sel.DeadLetterFilter(); exact {
				byDaemon, err := c.ListDeadLetters(ctx, client.DeadLetterFilter{
					WorkflowID: f.GetWorkflowId(), ActivityType: f.GetActivityType(), FailureType: f.GetFailureType(), FailureFingerprint: f.GetFailureFingerprint(),
				})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(keys(byDaemon), keys(want)) {
					t.Errorf("the daemon's filter selects %v, Matches %v", keys(byDaemon), keys(want))
				}
			}
			got, err := c.SelectDeadLetters(ctx, sel)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(keys(got), keys(want)) {
				t.Errorf("SelectDeadLetters = %v, want %v", keys(got), keys(want))
			}
		})
	}
}
