package storetest

import (
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// WorkflowWithStatus returns a workflow of status st with no workflow task;
// a closed one closed at T0+closed.
func WorkflowWithStatus(id string, st durablev1.WorkflowStatus, closed time.Duration) *durablev1.WorkflowRecord {
	w := NewWorkflow(id, durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, 0, 0)
	w.Info.Status = st
	if st != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
		w.Info.CloseTime = at(closed)
	}
	return w
}

// running renders the running index as workflow ids, stopping after limit.
func (h *harness) running(limit int) []string {
	h.t.Helper()
	var out []string
	h.view(func(tx engine.Tx) error {
		return tx.RunningWorkflows(func(w *durablev1.WorkflowRecord) bool {
			if w.GetInfo().GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
				h.t.Errorf("RunningWorkflows passed %s, which is %v", w.GetInfo().GetWorkflowId(), w.GetInfo().GetStatus())
			}
			out = append(out, w.GetInfo().GetWorkflowId())
			return len(out) < limit
		})
	})
	return out
}

// closedSince renders the closed index from since on as "id@close",
// newest first, stopping after limit.
func (h *harness) closedSince(since time.Duration, limit int) []string {
	h.t.Helper()
	var out []string
	h.view(func(tx engine.Tx) error {
		return tx.ClosedWorkflows(T0.Add(since), func(w *durablev1.WorkflowRecord) bool {
			out = append(out, w.GetInfo().GetWorkflowId()+"@"+w.GetInfo().GetCloseTime().AsTime().Sub(T0).String())
			return len(out) < limit
		})
	})
	return out
}

// testWorkflowStatusIndexesFollowTheRecord walks workflows from running to
// closed (and one back, as a reset would) and checks after each step and a
// reopen which of the running and closed indexes holds them.
func testWorkflowStatusIndexesFollowTheRecord(h *harness) {
	t := h.t
	const (
		running   = durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
		completed = durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED
		failed    = durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED
	)
	steps := []struct {
		name        string
		recs        []*durablev1.WorkflowRecord
		wantRunning []string
		wantClosed  []string
	}{
		{"Started", []*durablev1.WorkflowRecord{WorkflowWithStatus("b", running, 0), WorkflowWithStatus("a", running, 0), WorkflowWithStatus("c", running, 0)},
			[]string{"a", "b", "c"}, nil},
		{"OneCompleted", []*durablev1.WorkflowRecord{WorkflowWithStatus("b", completed, time.Minute)},
			[]string{"a", "c"}, []string{"b@1m0s"}},
		{"TwoMoreClosed", []*durablev1.WorkflowRecord{WorkflowWithStatus("a", failed, time.Hour), WorkflowWithStatus("c", completed, time.Second)},
			nil, []string{"a@1h0m0s", "b@1m0s", "c@1s"}},
		{"ClosedAgainLater", []*durablev1.WorkflowRecord{WorkflowWithStatus("c", failed, 2*time.Hour)},
			nil, []string{"c@2h0m0s", "a@1h0m0s", "b@1m0s"}},
		{"RunningAgain", []*durablev1.WorkflowRecord{WorkflowWithStatus("a", running, 0)},
			[]string{"a"}, []string{"c@2h0m0s", "b@1m0s"}},
		{"WithoutStatus", []*durablev1.WorkflowRecord{NewWorkflow("d", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, 0, 0)},
			[]string{"a"}, []string{"c@2h0m0s", "b@1m0s"}},
	}
	for _, st := range steps {
		h.update(func(tx engine.Tx) error {
			for _, w := range st.recs {
				if err := tx.PutWorkflow(w); err != nil {
					return err
				}
			}
			return nil
		})
		h.written()
		wantStrings(t, st.name+": running", h.running(100), st.wantRunning)
		wantStrings(t, st.name+": closed", h.closedSince(-time.Hour, 100), st.wantClosed)
	}
}

// testClosedWorkflowsWindow reads the closed index from a given instant on,
// newest first, with the bound inclusive, and stops when fn says so.
func testClosedWorkflowsWindow(h *harness) {
	t := h.t
	h.update(func(tx engine.Tx) error {
		for i, d := range []time.Duration{-time.Hour, 0, time.Nanosecond, time.Minute, time.Minute, 24 * time.Hour} {
			id := string(rune('a' + i))
			if err := tx.PutWorkflow(WorkflowWithStatus(id, durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED, d)); err != nil {
				return err
			}
		}
		return tx.PutWorkflow(WorkflowWithStatus("running", durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING, 0))
	})
	h.written()
	all := []string{"f@24h0m0s", "e@1m0s", "d@1m0s", "c@1ns", "b@0s", "a@-1h0m0s"}
	tests := []struct {
		name  string
		since time.Duration
		limit int
		want  []string
	}{
		{"Everything", -48 * time.Hour, 100, all},
		{"FromAnInstantOn", 0, 100, all[:5]},
		{"BoundIsInclusive", time.Nanosecond, 100, all[:4]},
		{"Newest", 0, 2, all[:2]},
		{"NoneSoRecent", 25 * time.Hour, 100, nil},
	}
	for _, tt := range tests {
		wantStrings(t, tt.name, h.closedSince(tt.since, tt.limit), tt.want)
	}
	wantStrings(t, "running", h.running(100), []string{"running"})
	wantStrings(t, "running, first only", h.running(1), []string{"running"})
}
