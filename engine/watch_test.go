package engine_test

import (
	"context"
	"fmt"
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

// TestWatchShowsWhetherWritesAreRefused: a snapshot ends with the state of
// writes; a refusal and the end of it are sent at once, a refusal renewed
// with fresh figures at most every ten seconds, with the time it began.
func TestWatchShowsWhetherWritesAreRefused(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
	none := func() {
		t.Helper()
		select {
		case ev := <-events:
			t.Fatalf("unexpected event %v", ev)
		default:
		}
	}
	done := next()
	if done.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE || done.GetWrites() == nil || done.GetWrites().GetRefused() {
		t.Fatalf("SNAPSHOT_DONE = %v, want writes accepted", done)
	}

	h.clock.Advance(time.Minute)
	began := h.clock.Now()
	h.e.RefuseWrites(fmt.Errorf("%w: 3 MiB free", engine.ErrNoSpace))
	up := next()
	if w := up.GetWrites(); up.GetKind() != durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT || !w.GetRefused() || w.GetReason() != "not enough disk space: 3 MiB free" || !w.GetSince().AsTime().Equal(began) {
		t.Fatalf("after RefuseWrites: %v", up)
	}
	// Renewed a second later: not sent; ten seconds after the last one: sent,
	// still refused since the same time.
	h.clock.Advance(time.Second)
	h.e.RefuseWrites(fmt.Errorf("%w: 2 MiB free", engine.ErrNoSpace))
	none()
	h.clock.Advance(10 * time.Second)
	h.e.RefuseWrites(fmt.Errorf("%w: 1 MiB free", engine.ErrNoSpace))
	if w := next().GetWrites(); w.GetReason() != "not enough disk space: 1 MiB free" || !w.GetSince().AsTime().Equal(began) {
		t.Fatalf("renewed refusal: %v", w)
	}
	h.clock.Advance(time.Second)
	h.e.AllowWrites()
	if w := next().GetWrites(); w == nil || w.GetRefused() || w.GetReason() != "" || !w.GetSince().AsTime().Equal(h.clock.Now()) {
		t.Fatalf("after AllowWrites: %v", w)
	}
}
