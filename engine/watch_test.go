package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// TestWatchSnapshotThenChanges: a watcher first gets the pending activities
// and the running workflows (plus recently closed ones, but not those closed
// more than a day ago), then SNAPSHOT_DONE, then each change as it commits.
func TestWatchSnapshotThenChanges(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// An old closed workflow, then two days pass.
	h.start("old", "X")
	if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: h.pollWorkflow().GetTaskToken(), Commands: []*durablev1.Command{
		{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW},
	}}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(48 * time.Hour)
	h.startWithActivity("wf", nil)

	events := make(chan *durablev1.WatchEvent, 100)
	go h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
		events <- ev
		return nil
	})
	next := func() *durablev1.WatchEvent {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event within 10s")
			return nil
		}
	}
	snap := next()
	if snap.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT || len(snap.GetActivities()) != 1 || len(snap.GetWorkflows()) != 1 || snap.GetWorkflows()[0].GetWorkflowId() != "wf" {
		t.Fatalf("snapshot = %v, want wf's one activity and wf alone (old closed two days ago)", snap)
	}
	if done := next(); done.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
		t.Fatalf("after the snapshot: %v", done.GetKind())
	}
	task := h.pollActivity()
	if up := next(); up.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT || up.GetActivities()[0].GetState() != durablev1.ActivityState_ACTIVITY_STATE_STARTED {
		t.Fatalf("after the poll: %v", up)
	}
	if _, err := h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()}); err != nil {
		t.Fatal(err)
	}
	if rm := next(); rm.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE || rm.GetRemoved()[0].GetActivityId() != "1" {
		t.Fatalf("after the completion: %v", rm)
	}
}
