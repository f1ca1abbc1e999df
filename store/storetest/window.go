package storetest

import (
	"fmt"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// testActivityCountsFollowTheRecords: the counts per queue and state move
// with every put and delete, a count that falls to zero is gone, and they
// are what a reopened store reads.
func testActivityCountsFollowTheRecords(h *harness) {
	elsewhere := NewActivity("wf", "x", retrying, time.Hour, 9)
	elsewhere.Info.TaskQueue = "q2"
	h.update(putActivities(
		NewActivity("wf", "a", scheduled, 0, 1),
		NewActivity("wf", "b", scheduled, 0, 2),
		NewActivity("wf", "c", retrying, time.Hour, 3),
		NewActivity("wf", "d", started, time.Minute, 4),
		elsewhere,
	))
	h.update(func(tx engine.Tx) error {
		// b starts, its own write again changes nothing, d is dead-lettered
		// and then deleted, c is deleted.
		if err := tx.PutActivity(NewActivity("wf", "b", started, time.Minute, 2)); err != nil {
			return err
		}
		if err := tx.PutActivity(NewActivity("wf", "b", started, 2*time.Minute, 2)); err != nil {
			return err
		}
		if err := tx.PutActivity(NewActivity("wf", "d", deadLettered, 0, 4)); err != nil {
			return err
		}
		if err := tx.DeleteActivity("wf", "d"); err != nil {
			return err
		}
		return tx.DeleteActivity("wf", "c")
	})
	h.written()
	var got []string
	h.view(func(tx engine.Tx) error {
		kept, err := tx.ActivityCounts(func(queue string, state durablev1.ActivityState, n int64) bool {
			got = append(got, fmt.Sprintf("%s/%s=%d", queue, state, n))
			return true
		})
		if !kept && err == nil {
			h.t.Error("a new store says it keeps no activity counts")
		}
		return err
	})
	wantStrings(h.t, "counts", got, []string{
		"q/ACTIVITY_STATE_SCHEDULED=1", "q/ACTIVITY_STATE_STARTED=1", "q2/ACTIVITY_STATE_RETRYING=1",
	})
}

// testQueuedInSeeksEveryQueue: QueuedIn gives every queue's entries of one
// kind within the range, queues of any name length, and nothing of the
// other kind or outside the range.
func testQueuedInSeeksEveryQueue(h *harness) {
	inQueue := func(a *durablev1.ActivityRecord, q string) *durablev1.ActivityRecord {
		a.Info.TaskQueue = q
		return a
	}
	h.update(putActivities(
		NewActivity("wf", "a", scheduled, 0, 1),
		NewActivity("wf", "b", retrying, time.Minute, 2),
		NewActivity("wf", "c", retrying, time.Hour, 3),
		NewActivity("wf", "d", started, time.Minute, 4),
		inQueue(NewActivity("wf", "e", retrying, time.Minute, 5), "q2"),
		inQueue(NewActivity("wf", "f", retrying, 2*time.Hour, 6), "q2"),
		inQueue(NewActivity("wf", "g", retrying, 30*time.Second, 7), "p"),
		inQueue(NewActivity("wf", "h", scheduled, 0, 8), "long queue name"),
	))
	h.update(func(tx engine.Tx) error {
		return tx.PutWorkflow(NewWorkflow("wf", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED, time.Minute, 9))
	})
	h.written()
	in := func(r engine.TimeRange, limit int) []string {
		var out []string
		h.view(func(tx engine.Tx) error {
			return tx.QueuedIn(engine.ActivityTask, r, func(e engine.QueueEntry) bool {
				out = append(out, fmt.Sprintf("%s:%s@%v", e.Queue, e.ActivityID, e.Due.Sub(T0)))
				return len(out) < limit
			})
		})
		return out
	}
	tests := []struct {
		name  string
		r     engine.TimeRange
		limit int
		want  []string
	}{
		{"All", engine.TimeRange{}, 100, []string{"p:g@30s", "q:a@0s", "q:b@1m0s", "q:c@1h0m0s", "q2:e@1m0s", "q2:f@2h0m0s", "long queue name:h@0s"}},
		{"Before", engine.TimeRange{Before: T0.Add(time.Minute)}, 100, []string{"p:g@30s", "q:a@0s", "long queue name:h@0s"}},
		{"Window", engine.TimeRange{From: T0.Add(time.Minute), Before: T0.Add(2 * time.Hour)}, 100, []string{"q:b@1m0s", "q:c@1h0m0s", "q2:e@1m0s"}},
		{"From", engine.TimeRange{From: T0.Add(time.Hour)}, 100, []string{"q:c@1h0m0s", "q2:f@2h0m0s"}},
		{"Empty", engine.TimeRange{From: T0.Add(3 * time.Hour)}, 100, nil},
		{"Stops", engine.TimeRange{}, 2, []string{"p:g@30s", "q:a@0s"}},
	}
	for _, tt := range tests {
		wantStrings(h.t, tt.name, in(tt.r, tt.limit), tt.want)
	}
	var wf []string
	h.view(func(tx engine.Tx) error {
		return tx.QueuedIn(engine.WorkflowTask, engine.TimeRange{}, func(e engine.QueueEntry) bool {
			wf = append(wf, fmt.Sprintf("%s:%s@%v", e.Queue, e.WorkflowID, e.Due.Sub(T0)))
			return true
		})
	})
	wantStrings(h.t, "WorkflowTasks", wf, []string{"q:wf@1m0s"})
}

// testTimersInRange: TimersIn gives the timers of every kind due within the
// range, earliest first.
func testTimersInRange(h *harness) {
	h.update(putActivities(
		NewActivity("wf", "a", started, time.Minute, 1),
		NewActivity("wf", "b", started, time.Hour, 2),
	))
	h.update(func(tx engine.Tx) error {
		return tx.PutTimer(&durablev1.TimerRecord{WorkflowId: "wf", TimerId: "t", FireTime: at(30 * time.Minute)})
	})
	h.written()
	in := func(r engine.TimeRange) []string {
		var out []string
		h.view(func(tx engine.Tx) error {
			return tx.TimersIn(r, func(tm engine.Timer) bool {
				out = append(out, fmt.Sprintf("%s:%s/%s@%v", timerKindName[tm.Kind], tm.WorkflowID, tm.ID, tm.Due.Sub(T0)))
				return true
			})
		})
		return out
	}
	wantStrings(h.t, "All", in(engine.TimeRange{}), []string{"lease:wf/a@1m0s", "user:wf/t@30m0s", "lease:wf/b@1h0m0s"})
	wantStrings(h.t, "Window", in(engine.TimeRange{From: T0.Add(time.Minute + 1), Before: T0.Add(time.Hour)}), []string{"user:wf/t@30m0s"})
	wantStrings(h.t, "FromIncluded", in(engine.TimeRange{From: T0.Add(time.Hour)}), []string{"lease:wf/b@1h0m0s"})
}
