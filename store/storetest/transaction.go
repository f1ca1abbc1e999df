package storetest

import (
	"errors"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func testFailedUpdateWritesNothing(h *harness) {
	t := h.t
	boom := errors.New("boom")
	err := h.s.Update(func(tx engine.Tx) error {
		if err := tx.PutActivity(NewActivity("wf", "1", scheduled, 0, 1)); err != nil {
			return err
		}
		if err := tx.SetCounter(9); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	h.written()
	h.view(func(tx engine.Tx) error {
		_, err := tx.GetActivity("wf", "1")
		wantNotFound(t, "activity of a failed update", err)
		if n, _ := tx.Counter(); n != 0 {
			t.Errorf("counter of a failed update = %d, want 0", n)
		}
		return nil
	})
	wantStrings(t, "queue after a failed update", h.queued(engine.ActivityTask, "q", 10), nil)
}

func testUpdateReadsItsOwnWrites(h *harness) {
	t := h.t
	h.update(func(tx engine.Tx) error {
		if err := tx.PutActivity(NewActivity("wf", "1", scheduled, 0, 1)); err != nil {
			return err
		}
		es, err := tx.Queued(engine.ActivityTask, "q", 10)
		if err != nil {
			return err
		}
		if len(es) != 1 || es[0].ActivityID != "1" {
			t.Errorf("Queued in the writing transaction = %+v, want wf/1", es)
		}
		a, err := tx.GetActivity("wf", "1")
		if err != nil {
			return err
		}
		a.Info.State = started
		a.Info.LeaseDeadline = at(0)
		if err := tx.PutActivity(a); err != nil {
			return err
		}
		if es, err := tx.Queued(engine.ActivityTask, "q", 10); err != nil || len(es) != 0 {
			t.Errorf("Queued after starting in the same transaction = %+v, %v; want none", es, err)
		}
		return nil
	})
}

// testReopenRecoversEverything writes records in every state in one
// transaction, ends the write phase (a reopen where the store has one) and
// checks records and indexes.
func testReopenRecoversEverything(h *harness) {
	t := h.t
	workflows := []*durablev1.WorkflowRecord{
		NewWorkflow("w-none", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, 0, 0),
		NewWorkflow("w-sched", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED, time.Second, 1),
		NewWorkflow("w-started", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_STARTED, 2*time.Second, 2),
	}
	activities := []*durablev1.ActivityRecord{
		NewActivity("w-sched", "1", scheduled, 3*time.Second, 3),
		NewActivity("w-sched", "2", started, 4*time.Second, 4),
		NewActivity("w-started", "1", retrying, 5*time.Second, 5),
		NewActivity("w-started", "2", deadLettered, 6*time.Second, 6),
	}
	timer := &durablev1.TimerRecord{WorkflowId: "w-none", TimerId: "t", FireTime: at(7 * time.Second), StartedEventId: 5}
	latency := &durablev1.LatencyRecord{ActivityType: "Charge", Attempts: 2, Buckets: []int64{1, 1}}
	event := &durablev1.HistoryEvent{EventId: 1, Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, WorkflowType: "Order"}
	h.update(func(tx engine.Tx) error {
		for _, w := range workflows {
			if err := tx.PutWorkflow(w); err != nil {
				return err
			}
		}
		return errors.Join(
			putActivities(activities...)(tx),
			tx.PutTimer(timer), tx.PutLatency(latency), tx.SetCounter(77),
			tx.AppendEvents("w-none", []*durablev1.HistoryEvent{event}),
		)
	})
	h.written()

	h.view(func(tx engine.Tx) error {
		for _, w := range workflows {
			got, err := tx.GetWorkflow(w.GetInfo().GetWorkflowId())
			if err != nil {
				return err
			}
			wantEqual(t, "workflow", got, w)
		}
		for _, a := range activities {
			got, err := tx.GetActivity(a.GetInfo().GetWorkflowId(), a.GetInfo().GetActivityId())
			if err != nil {
				return err
			}
			wantEqual(t, "activity", got, a)
		}
		gotTimer, err := tx.GetTimer("w-none", "t")
		if err != nil {
			return err
		}
		wantEqual(t, "timer", gotTimer, timer)
		gotLatency, err := tx.GetLatency("Charge")
		if err != nil {
			return err
		}
		wantEqual(t, "latency", gotLatency, latency)
		hist, err := tx.History("w-none")
		if err != nil || len(hist) != 1 {
			t.Fatalf("history = %v, %v; want one event", hist, err)
		}
		wantEqual(t, "event", hist[0], event)
		if n, err := tx.Counter(); err != nil || n != 77 {
			t.Errorf("counter = %d, %v; want 77", n, err)
		}
		return nil
	})
	wantStrings(t, "workflow queue", h.queued(engine.WorkflowTask, "q", 10), []string{"w-sched/@1s#1"})
	wantStrings(t, "activity queue", h.queued(engine.ActivityTask, "q", 10), []string{"w-sched/1@3s#3", "w-started/1@5s#5"})
	wantStrings(t, "timers", h.timers(10), []string{"wtlease:w-started/@2s", "lease:w-sched/2@4s", "user:w-none/t@7s"})
	wantStrings(t, "dead letters", h.deadLetters(), []string{"w-started/2"})
}

// testClosedStoreRefusesWork closes the store: a second Close is no error,
// and every call after it is engine.ErrClosed (but Sync of a store that
// never syncs, which does nothing).
func testClosedStoreRefusesWork(h *harness) {
	t := h.t
	s := h.s
	h.closed = true
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	noop := func(engine.Tx) error { return nil }
	for name, err := range map[string]error{"Update": s.Update(noop), "View": s.View(noop), "Sync": s.Sync()} {
		if !errors.Is(err, engine.ErrClosed) {
			t.Errorf("%s after Close = %v, want engine.ErrClosed", name, err)
		}
	}
}
