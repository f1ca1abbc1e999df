package client_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestWorkflowWaitSaysWhatARunningWorkflowWaitsOn(t *testing.T) {
	now := time.Date(2026, 1, 1, 6, 14, 5, 0, time.UTC)
	ready := timestamppb.New(now.Add(-5900 * time.Millisecond))
	running := durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
	polled := &durablev1.TaskQueue{Name: "orders", WorkflowTasks: &durablev1.TaskBacklog{Ready: 1}, Pollers: []*durablev1.Poller{
		{Identity: "w1", Kind: durablev1.TaskKind_TASK_KIND_WORKFLOW, Parked: true},
	}}
	stalled := &durablev1.TaskQueue{Name: "orders", WorkflowTasks: &durablev1.TaskBacklog{Ready: 1, Stalled: true}, Stalled: true}
	activityOnly := &durablev1.TaskQueue{Name: "orders", WorkflowTasks: &durablev1.TaskBacklog{Ready: 1}, Pollers: []*durablev1.Poller{
		{Identity: "w1", Kind: durablev1.TaskKind_TASK_KIND_ACTIVITY, Parked: true},
	}}
	cases := []struct {
		name   string
		wf     *durablev1.WorkflowInfo
		queues []*durablev1.TaskQueue
		want   string // "" when it waits on no queue
	}{
		{"closed", &durablev1.WorkflowInfo{Status: durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED, TaskQueue: "orders", WorkflowTaskReadyTime: ready}, nil, ""},
		{"task run by a worker", &durablev1.WorkflowInfo{Status: running, TaskQueue: "orders"}, nil, ""},
		{"queue not listed", &durablev1.WorkflowInfo{Status: running, TaskQueue: "orders", WorkflowTaskReadyTime: ready}, nil,
			"workflow task waiting 5.9s on queue orders, no poller"},
		{"queue stalled", &durablev1.WorkflowInfo{Status: running, TaskQueue: "orders", WorkflowTaskReadyTime: ready}, []*durablev1.TaskQueue{stalled},
			"workflow task waiting 5.9s on queue orders, no poller"},
		{"an activity poller only", &durablev1.WorkflowInfo{Status: running, TaskQueue: "orders", WorkflowTaskReadyTime: ready}, []*durablev1.TaskQueue{activityOnly},
			"workflow task waiting 5.9s on queue orders, no poller"},
		{"polled", &durablev1.WorkflowInfo{Status: running, TaskQueue: "orders", WorkflowTaskReadyTime: ready}, []*durablev1.TaskQueue{polled},
			"workflow task waiting 5.9s on queue orders"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, ok := client.WorkflowWait(c.wf, c.queues)
			got := ""
			if ok {
				got = w.String(now)
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestActivityWaitOnlyCountsActivitiesThatAreDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 6, 14, 5, 0, time.UTC)
	stalled := []*durablev1.TaskQueue{{Name: "q", ActivityTasks: &durablev1.TaskBacklog{Ready: 1, Stalled: true}, Stalled: true}}
	cases := []struct {
		name string
		a    *durablev1.PendingActivity
		want string
	}{
		{"backoff not over", &durablev1.PendingActivity{ActivityId: "1", TaskQueue: "q", State: durablev1.ActivityState_ACTIVITY_STATE_RETRYING, NextAttemptTime: timestamppb.New(now.Add(time.Second))}, ""},
		{"running", &durablev1.PendingActivity{ActivityId: "1", TaskQueue: "q", State: durablev1.ActivityState_ACTIVITY_STATE_STARTED}, ""},
		{"due", &durablev1.PendingActivity{ActivityId: "1", TaskQueue: "q", State: durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, NextAttemptTime: timestamppb.New(now.Add(-90 * time.Second))},
			"activity 1 waiting 1m30s on queue q, no poller"},
		// The due time of NextOf: without a next attempt time, a first
		// attempt is due from when it was scheduled.
		{"due from its scheduling", &durablev1.PendingActivity{ActivityId: "1", TaskQueue: "q", State: durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, ScheduledTime: timestamppb.New(now.Add(-5 * time.Second))},
			"activity 1 waiting 5.0s on queue q, no poller"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, ok := client.ActivityWait(c.a, stalled, now)
			got := ""
			if ok {
				got = w.String(now)
			}
			if got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}
