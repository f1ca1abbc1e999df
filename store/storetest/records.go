package storetest

import (
	"errors"
	"strings"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func testWorkflowRoundTrip(h *harness) {
	t := h.t
	h.view(func(tx engine.Tx) error {
		_, err := tx.GetWorkflow("wf")
		wantNotFound(t, "GetWorkflow before Put", err)
		return nil
	})
	w := NewWorkflow("wf", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, 0, 0)
	w.Info.Status = durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
	h.update(func(tx engine.Tx) error { return tx.PutWorkflow(w) })
	h.written()
	h.view(func(tx engine.Tx) error {
		got, err := tx.GetWorkflow("wf")
		if err != nil {
			return err
		}
		wantEqual(t, "workflow", got, w)
		return nil
	})
	w2 := NewWorkflow("wf", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, 0, 0)
	w2.Info.Status = durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED
	w2.Info.Result = []byte("done")
	h.update(func(tx engine.Tx) error { return tx.PutWorkflow(w2) })
	h.written()
	h.view(func(tx engine.Tx) error {
		got, err := tx.GetWorkflow("wf")
		if err != nil {
			return err
		}
		wantEqual(t, "overwritten workflow", got, w2)
		return nil
	})
}

func testListWorkflowsPages(h *harness) {
	t := h.t
	none := durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE
	h.update(func(tx engine.Tx) error {
		for _, id := range []string{"w3", "w1", "w5", "w2", "w4"} {
			if err := tx.PutWorkflow(NewWorkflow(id, none, 0, 0)); err != nil {
				return err
			}
		}
		return nil
	})
	h.written()
	tests := []struct {
		after string
		limit int
		want  []string
	}{
		{"", 2, []string{"w1", "w2"}},
		{"w2", 2, []string{"w3", "w4"}},
		{"w4", 10, []string{"w5"}},
		{"w5", 10, nil},
		{"w25", 1, []string{"w3"}},
		{"", 0, nil},
		{"", 100, []string{"w1", "w2", "w3", "w4", "w5"}},
	}
	for _, tt := range tests {
		h.view(func(tx engine.Tx) error {
			ws, err := tx.ListWorkflows(tt.after, tt.limit)
			var ids []string
			for _, w := range ws {
				ids = append(ids, w.GetInfo().GetWorkflowId())
			}
			wantStrings(t, "ListWorkflows("+tt.after+")", ids, tt.want)
			return err
		})
	}
}

func testHistoryInEventOrder(h *harness) {
	t := h.t
	events := func(wf string, from, to int64) []*durablev1.HistoryEvent {
		var evs []*durablev1.HistoryEvent
		for id := from; id <= to; id++ {
			evs = append(evs, &durablev1.HistoryEvent{EventId: id, Time: at(0), Type: durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, TaskQueue: wf})
		}
		return evs
	}
	h.update(func(tx engine.Tx) error { return tx.AppendEvents("wf", events("wf", 1, 9)) })
	h.update(func(tx engine.Tx) error {
		if err := tx.AppendEvents("wf1", events("wf1", 1, 3)); err != nil {
			return err
		}
		return tx.AppendEvents("wf", events("wf", 10, 300))
	})
	h.written()
	h.view(func(tx engine.Tx) error {
		got, err := tx.History("wf")
		if err != nil {
			return err
		}
		if len(got) != 300 {
			t.Fatalf("History(wf) has %d events, want 300", len(got))
		}
		for i, ev := range got {
			if ev.GetEventId() != int64(i+1) || ev.GetTaskQueue() != "wf" {
				t.Fatalf("History(wf)[%d] = event %d of %q", i, ev.GetEventId(), ev.GetTaskQueue())
			}
		}
		if got, err := tx.History("wf1"); err != nil || len(got) != 3 {
			t.Errorf("History(wf1) = %d events, %v; want 3", len(got), err)
		}
		if got, err := tx.History("nope"); err != nil || len(got) != 0 {
			t.Errorf("History(nope) = %d events, %v; want none", len(got), err)
		}
		for _, r := range []struct{ from, through, first, n int64 }{
			{1, 300, 1, 300},
			{9, 11, 9, 3}, // across the two transactions' events
			{0, 2, 1, 2},
			{300, 400, 300, 1},
			{301, 400, 0, 0},
			{5, 4, 0, 0},
		} {
			got, err := tx.HistoryRange("wf", r.from, r.through)
			if err != nil {
				return err
			}
			if int64(len(got)) != r.n {
				t.Fatalf("HistoryRange(wf, %d, %d) has %d events, want %d", r.from, r.through, len(got), r.n)
			}
			for i, ev := range got {
				if ev.GetEventId() != r.first+int64(i) || ev.GetTaskQueue() != "wf" {
					t.Fatalf("HistoryRange(wf, %d, %d)[%d] = event %d of %q", r.from, r.through, i, ev.GetEventId(), ev.GetTaskQueue())
				}
			}
		}
		if got, err := tx.HistoryRange("wf1", 2, 10); err != nil || len(got) != 2 {
			t.Errorf("HistoryRange(wf1, 2, 10) = %d events, %v; want 2", len(got), err)
		}
		return nil
	})
}

func testActivitiesOfOneWorkflow(h *harness) {
	t := h.t
	h.update(putActivities(
		NewActivity("wf", "1", scheduled, 0, 1),
		NewActivity("wf", "2", started, 0, 2),
		NewActivity("wf1", "1", retrying, 0, 3),
		NewActivity("w", "f1", deadLettered, 0, 4),
	))
	h.written()
	h.view(func(tx engine.Tx) error {
		got, err := tx.GetActivity("wf", "2")
		if err != nil {
			return err
		}
		wantEqual(t, "activity wf/2", got, NewActivity("wf", "2", started, 0, 2))
		_, err = tx.GetActivity("wf", "3")
		wantNotFound(t, "GetActivity(wf, 3)", err)

		as, err := tx.Activities("wf")
		if err != nil {
			return err
		}
		var ids []string
		for _, a := range as {
			ids = append(ids, a.GetInfo().GetWorkflowId()+"/"+a.GetInfo().GetActivityId())
		}
		wantStrings(t, "Activities(wf)", ids, []string{"wf/1", "wf/2"})

		var all []string
		if err := tx.ScanActivities(func(a *durablev1.ActivityRecord) bool {
			all = append(all, a.GetInfo().GetIdempotencyKey())
			return true
		}); err != nil {
			return err
		}
		if len(all) != 4 {
			t.Errorf("ScanActivities saw %q, want 4 activities", all)
		}
		n := 0
		if err := tx.ScanActivities(func(*durablev1.ActivityRecord) bool { n++; return n < 2 }); err != nil {
			return err
		}
		if n != 2 {
			t.Errorf("ScanActivities went on after fn returned false: %d calls, want 2", n)
		}
		return nil
	})
}

func testLatencyRecords(h *harness) {
	t := h.t
	charge := &durablev1.LatencyRecord{ActivityType: "Charge", Attempts: 3, Failures: 1, MaxNs: 9e6, Buckets: []int64{0, 1, 2},
		LastOptions: &durablev1.ActivityOptions{TaskQueue: "payments", RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 2}}}
	ship := &durablev1.LatencyRecord{ActivityType: "Ship", Attempts: 1}
	h.update(func(tx engine.Tx) error {
		if err := tx.PutLatency(ship); err != nil {
			return err
		}
		return tx.PutLatency(charge)
	})
	h.written()
	h.view(func(tx engine.Tx) error {
		got, err := tx.GetLatency("Charge")
		if err != nil {
			return err
		}
		wantEqual(t, "latency of Charge", got, charge)
		_, err = tx.GetLatency("Nope")
		wantNotFound(t, "GetLatency(Nope)", err)
		all, err := tx.ListLatency()
		if err != nil {
			return err
		}
		if len(all) != 2 || all[0].GetActivityType() != "Charge" || all[1].GetActivityType() != "Ship" {
			t.Errorf("ListLatency = %v, want Charge then Ship", all)
		}
		return nil
	})
}

func testCounter(h *harness) {
	t := h.t
	h.view(func(tx engine.Tx) error {
		if n, err := tx.Counter(); err != nil || n != 0 {
			t.Errorf("Counter of a new store = %d, %v; want 0", n, err)
		}
		return nil
	})
	h.update(func(tx engine.Tx) error { return tx.SetCounter(41) })
	h.update(func(tx engine.Tx) error {
		n, err := tx.Counter()
		if err != nil {
			return err
		}
		return tx.SetCounter(n + 1)
	})
	h.written()
	h.view(func(tx engine.Tx) error {
		if n, err := tx.Counter(); err != nil || n != 42 {
			t.Errorf("Counter = %d, %v; want 42", n, err)
		}
		return nil
	})
}

func testActivityIDsAreNeverReleased(h *harness) {
	t := h.t
	use := func(wf, id string) bool {
		var used bool
		h.update(func(tx engine.Tx) (err error) {
			used, err = tx.UseActivityID(wf, id)
			return err
		})
		return used
	}
	if use("wf", "1") {
		t.Error("a fresh id reported as used")
	}
	if !use("wf", "1") {
		t.Error("an id used in an earlier transaction reported as fresh")
	}
	if use("wf-2", "1") || use("wf", "10") {
		t.Error("ids of another workflow, or a longer id, collide")
	}
	h.written()
	if !use("wf", "1") {
		t.Error("a used id was forgotten by a reopened store")
	}
}

func testOversizedInputsAreInvalid(h *harness) {
	t := h.t
	maxID, maxRecord := h.opened.MaxIDLen, h.opened.MaxRecordSize
	var inv *engine.InvalidError
	if maxID > 0 {
		long := strings.Repeat("x", maxID+1)
		err := h.s.Update(func(tx engine.Tx) error { return tx.PutActivity(NewActivity(long, "1", scheduled, 0, 1)) })
		if !errors.As(err, &inv) || inv.Field != "workflow_id" {
			t.Errorf("PutActivity with a long workflow id = %v, want *engine.InvalidError on workflow_id", err)
		}
		err = h.s.Update(func(tx engine.Tx) error { return tx.PutWorkflow(NewWorkflow(strings.Repeat("y", maxID), 0, 0, 0)) })
		if err != nil {
			t.Errorf("PutWorkflow with an id of exactly %d bytes = %v, want nil", maxID, err)
		}
	}
	if maxRecord > 0 {
		huge := NewActivity("wf", "1", scheduled, 0, 1)
		huge.Input = make([]byte, maxRecord)
		err := h.s.Update(func(tx engine.Tx) error { return tx.PutActivity(huge) })
		if !errors.As(err, &inv) || inv.Field != "record" {
			t.Errorf("PutActivity of a record over %d bytes = %v, want *engine.InvalidError on record", maxRecord, err)
		}
	}
	wantStrings(t, "queue after refused writes", h.queued(engine.ActivityTask, "q", 10), nil)
}
