package storetest

import (
	"fmt"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// scanned is more than a page of every store's scans, so that a scan reads
// several.
const scanned = 300

// testScansKeepTheirViewWhileOthersCommit: a View's ScanActivities,
// RunningWorkflows and ClosedWorkflows call fn for what the view holds
// while other transactions commit from inside fn (as a Watch's scans wait
// for a client while the engine commits): a record deleted after the scan
// began is still seen, one written after is not, one changed after is seen
// as it was, on every page.
func testScansKeepTheirViewWhileOthersCommit(h *harness) {
	t := h.t
	wf := func(i int) string { return fmt.Sprintf("w%04d", i) }
	h.update(func(tx engine.Tx) error {
		for i := range scanned {
			if err := tx.PutActivity(NewActivity(wf(i), "1", scheduled, time.Duration(i), int64(i+1))); err != nil {
				return err
			}
			if err := tx.PutWorkflow(WorkflowWithStatus(wf(i), durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING, 0)); err != nil {
				return err
			}
			closed := WorkflowWithStatus("c"+wf(i), durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED, time.Duration(i)*time.Second)
			if err := tx.PutWorkflow(closed); err != nil {
				return err
			}
		}
		return nil
	})
	h.written()
	// change runs once, at the first record a scan passes to fn: it
	// deletes, changes and adds records the scan has not reached yet.
	// Each scan's changes leave what the others read alone.
	changes := []struct {
		name   string
		change func(tx engine.Tx) error
	}{
		{"ScanActivities", func(tx engine.Tx) error {
			if err := tx.DeleteActivity(wf(scanned-1), "1"); err != nil {
				return err
			}
			a := NewActivity(wf(scanned-2), "1", started, 0, int64(scanned-1))
			a.Info.LeaseDeadline = at(time.Hour)
			if err := tx.PutActivity(a); err != nil {
				return err
			}
			return tx.PutActivity(NewActivity(wf(scanned), "1", scheduled, 0, scanned+1))
		}},
		{"RunningWorkflows", func(tx engine.Tx) error {
			// Closed before the window ClosedWorkflows reads.
			if err := tx.PutWorkflow(WorkflowWithStatus(wf(scanned-1), durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED, -2*time.Hour)); err != nil {
				return err
			}
			return tx.PutWorkflow(WorkflowWithStatus(wf(scanned), durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING, 0))
		}},
		{"ClosedWorkflows", func(tx engine.Tx) error {
			// The newest close comes first: the oldest, read last, moves
			// out of the window, and a new one comes in.
			if err := tx.PutWorkflow(WorkflowWithStatus("c"+wf(0), durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED, -2*time.Hour)); err != nil {
				return err
			}
			return tx.PutWorkflow(WorkflowWithStatus("c"+wf(scanned), durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED, time.Hour))
		}},
	}
	for _, c := range changes {
		name, change := c.name, c.change
		var seen []string
		changed := false
		// visit notes what a scan passed to fn and, the first time,
		// commits change in another transaction.
		visit := func(id string) bool {
			seen = append(seen, id)
			if !changed {
				changed = true
				if err := h.s.Update(change); err != nil {
					t.Errorf("%s: committing during the scan: %v", name, err)
					return false
				}
			}
			return true
		}
		h.view(func(tx engine.Tx) error {
			switch name {
			case "ScanActivities":
				return tx.ScanActivities(func(a *durablev1.ActivityRecord) bool {
					return visit(a.GetInfo().GetWorkflowId() + "/" + a.GetInfo().GetState().String())
				})
			case "RunningWorkflows":
				return tx.RunningWorkflows(func(w *durablev1.WorkflowRecord) bool {
					return visit(w.GetInfo().GetWorkflowId() + "/" + w.GetInfo().GetStatus().String())
				})
			default:
				return tx.ClosedWorkflows(T0.Add(-time.Hour), func(w *durablev1.WorkflowRecord) bool {
					return visit(w.GetInfo().GetWorkflowId() + "/" + w.GetInfo().GetStatus().String())
				})
			}
		})
		var want []string
		for i := range scanned {
			switch name {
			case "ScanActivities":
				want = append(want, wf(i)+"/"+scheduled.String())
			case "RunningWorkflows":
				want = append(want, wf(i)+"/"+durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING.String())
			default:
				want = append(want, "c"+wf(scanned-1-i)+"/"+durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED.String())
			}
		}
		wantStrings(t, name+" while others commit", seen, want)
	}
}
