package storetest

import (
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// testActivityTransitionsMoveIndexEntries walks one activity through its life
// and checks after each step (and a reopen) which queue, timer and dead-letter
// entries exist. A bystander in another queue must never move.
func testActivityTransitionsMoveIndexEntries(h *harness) {
	t := h.t
	bystander := NewActivity("other", "1", scheduled, 5*time.Second, 9)
	bystander.Info.TaskQueue = "other"
	h.update(putActivities(bystander))

	withBudget := func(a *durablev1.ActivityRecord) *durablev1.ActivityRecord {
		a.Info.Options = &durablev1.ActivityOptions{ScheduleToStartTimeout: durationpb.New(10 * time.Second)}
		a.Info.ExpirationTime = at(time.Hour)
		return a
	}
	redriven := NewActivity("wf", "1", scheduled, 3*time.Minute, 3)
	redriven.Info.Options = &durablev1.ActivityOptions{ScheduleToStartTimeout: durationpb.New(10 * time.Second)}
	steps := []struct {
		name       string
		rec        *durablev1.ActivityRecord
		wantQueue  []string
		wantTimers []string
		wantDLQ    []string
	}{
		{"Scheduled", withBudget(NewActivity("wf", "1", scheduled, time.Second, 1)),
			[]string{"wf/1@1s#1"}, []string{"sts:wf/1@11s", "stc:wf/1@1h0m0s"}, nil},
		{"Started", withBudget(NewActivity("wf", "1", started, 30*time.Second, 1)),
			nil, []string{"lease:wf/1@30s", "stc:wf/1@1h0m0s"}, nil},
		{"Retrying", withBudget(NewActivity("wf", "1", retrying, 40*time.Second, 2)),
			[]string{"wf/1@40s#2"}, []string{"sts:wf/1@50s", "stc:wf/1@1h0m0s"}, nil},
		{"DeadLettered", withBudget(NewActivity("wf", "1", deadLettered, 2*time.Minute, 2)),
			nil, nil, []string{"wf/1"}},
		{"Redriven", redriven,
			[]string{"wf/1@3m0s#3"}, []string{"sts:wf/1@3m10s"}, nil},
	}
	for _, st := range steps {
		h.update(putActivities(st.rec))
		h.written()
		wantStrings(t, st.name+": queue", h.queued(engine.ActivityTask, "q", 10), st.wantQueue)
		wantStrings(t, st.name+": timers", h.timers(10), st.wantTimers)
		wantStrings(t, st.name+": dead letters", h.deadLetters(), st.wantDLQ)
		wantStrings(t, st.name+": bystander queue", h.queued(engine.ActivityTask, "other", 10), []string{"other/1@5s#9"})
		h.view(func(tx engine.Tx) error {
			got, err := tx.GetActivity("wf", "1")
			if err != nil {
				return err
			}
			wantEqual(t, st.name+": record", got, st.rec)
			return nil
		})
	}
}

func testWorkflowTaskTransitionsMoveIndexEntries(h *harness) {
	t := h.t
	steps := []struct {
		name       string
		rec        *durablev1.WorkflowRecord
		wantQueue  []string
		wantTimers []string
	}{
		{"None", NewWorkflow("wf", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, 0, 0), nil, nil},
		{"Scheduled", NewWorkflow("wf", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED, 5*time.Second, 4),
			[]string{"wf/@5s#4"}, nil},
		{"Started", NewWorkflow("wf", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_STARTED, 20*time.Second, 4),
			nil, []string{"wtlease:wf/@20s"}},
		{"ScheduledAgain", NewWorkflow("wf", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED, 25*time.Second, 6),
			[]string{"wf/@25s#6"}, nil},
		{"Done", NewWorkflow("wf", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE, 0, 6), nil, nil},
	}
	for _, st := range steps {
		h.update(func(tx engine.Tx) error { return tx.PutWorkflow(st.rec) })
		h.written()
		wantStrings(t, st.name+": workflow queue", h.queued(engine.WorkflowTask, "q", 10), st.wantQueue)
		wantStrings(t, st.name+": activity queue", h.queued(engine.ActivityTask, "q", 10), nil)
		wantStrings(t, st.name+": timers", h.timers(10), st.wantTimers)
	}
}

func testQueuedOrderAndLimit(h *harness) {
	t := h.t
	elsewhere := NewActivity("wf", "x", scheduled, 0, 0)
	elsewhere.Info.TaskQueue = "q2"
	h.update(putActivities(
		NewActivity("wf", "a", scheduled, 2*time.Second, 1),
		NewActivity("wf", "b", retrying, time.Second, 5),
		NewActivity("wf", "c", scheduled, time.Second, 3),
		NewActivity("wf", "d", scheduled, 3*time.Second, 0),
		NewActivity("wf", "e", retrying, time.Second, 4),
		NewActivity("wf", "f", started, 0, 0),
		elsewhere,
	))
	h.update(func(tx engine.Tx) error {
		return tx.PutWorkflow(NewWorkflow("wf", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED, 0, 2))
	})
	h.written()
	all := []string{"wf/c@1s#3", "wf/e@1s#4", "wf/b@1s#5", "wf/a@2s#1", "wf/d@3s#0"}
	tests := []struct {
		name  string
		kind  engine.TaskKind
		queue string
		limit int
		want  []string
	}{
		{"All", engine.ActivityTask, "q", 100, all},
		{"Limit", engine.ActivityTask, "q", 3, all[:3]},
		{"ZeroLimit", engine.ActivityTask, "q", 0, nil},
		{"OtherQueue", engine.ActivityTask, "q2", 10, []string{"wf/x@0s#0"}},
		{"WorkflowTasks", engine.WorkflowTask, "q", 10, []string{"wf/@0s#2"}},
		{"UnknownQueue", engine.ActivityTask, "nope", 10, nil},
	}
	for _, tt := range tests {
		wantStrings(t, tt.name, h.queued(tt.kind, tt.queue, tt.limit), tt.want)
	}
}

func testDueTimersOrderAndLimit(h *harness) {
	t := h.t
	h.update(func(tx engine.Tx) error {
		for _, r := range []*durablev1.TimerRecord{
			{WorkflowId: "wf", TimerId: "t1", FireTime: at(5 * time.Second), StartedEventId: 7},
			{WorkflowId: "wf", TimerId: "t2", FireTime: at(time.Second), StartedEventId: 8},
		} {
			if err := tx.PutTimer(r); err != nil {
				return err
			}
		}
		if err := tx.PutActivity(NewActivity("wf", "1", started, 3*time.Second, 1)); err != nil {
			return err
		}
		return tx.PutWorkflow(NewWorkflow("wf", durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_STARTED, 4*time.Second, 1))
	})
	h.written()
	all := []string{"user:wf/t2@1s", "lease:wf/1@3s", "wtlease:wf/@4s", "user:wf/t1@5s"}
	wantStrings(t, "DueTimers(10)", h.timers(10), all)
	wantStrings(t, "DueTimers(2)", h.timers(2), all[:2])
	wantStrings(t, "DueTimers(0)", h.timers(0), nil)
}

func testUserTimers(h *harness) {
	t := h.t
	r := &durablev1.TimerRecord{WorkflowId: "wf", TimerId: "t", FireTime: at(10 * time.Second), StartedEventId: 4}
	h.update(func(tx engine.Tx) error { return tx.PutTimer(r) })
	h.written()
	h.view(func(tx engine.Tx) error {
		got, err := tx.GetTimer("wf", "t")
		if err != nil {
			return err
		}
		wantEqual(t, "timer", got, r)
		_, err = tx.GetTimer("wf", "u")
		wantNotFound(t, "GetTimer(wf, u)", err)
		return nil
	})
	wantStrings(t, "timers", h.timers(10), []string{"user:wf/t@10s"})

	moved := &durablev1.TimerRecord{WorkflowId: "wf", TimerId: "t", FireTime: at(20 * time.Second), StartedEventId: 4}
	h.update(func(tx engine.Tx) error { return tx.PutTimer(moved) })
	h.written()
	wantStrings(t, "timers after a new fire time", h.timers(10), []string{"user:wf/t@20s"})

	h.update(func(tx engine.Tx) error { return tx.DeleteTimer("wf", "t") })
	h.written()
	wantStrings(t, "timers after delete", h.timers(10), nil)
	h.view(func(tx engine.Tx) error {
		_, err := tx.GetTimer("wf", "t")
		wantNotFound(t, "GetTimer after delete", err)
		return nil
	})
	err := h.s.Update(func(tx engine.Tx) error { return tx.DeleteTimer("wf", "t") })
	wantNotFound(t, "DeleteTimer of a missing timer", err)
}

func testDeleteActivityRemovesIndexEntries(h *harness) {
	t := h.t
	queuedOne := NewActivity("wf", "1", scheduled, time.Second, 1)
	queuedOne.Info.ExpirationTime = at(time.Hour)
	h.update(putActivities(
		queuedOne,
		NewActivity("wf", "2", started, time.Second, 2),
		NewActivity("wf", "3", deadLettered, time.Second, 3),
	))
	h.written()
	h.update(func(tx engine.Tx) error {
		for _, id := range []string{"1", "2", "3"} {
			if err := tx.DeleteActivity("wf", id); err != nil {
				return err
			}
		}
		return nil
	})
	h.written()
	wantStrings(t, "queue", h.queued(engine.ActivityTask, "q", 10), nil)
	wantStrings(t, "timers", h.timers(10), nil)
	wantStrings(t, "dead letters", h.deadLetters(), nil)
	h.view(func(tx engine.Tx) error {
		as, err := tx.Activities("wf")
		if len(as) != 0 {
			t.Errorf("Activities after delete = %v, want none", as)
		}
		return err
	})
	err := h.s.Update(func(tx engine.Tx) error { return tx.DeleteActivity("wf", "1") })
	wantNotFound(t, "DeleteActivity of a missing activity", err)
}

func testDeadLettersCursor(h *harness) {
	t := h.t
	var as []*durablev1.ActivityRecord
	for i, m := range []int{5, 1, 3, 2, 4} {
		as = append(as, NewActivity("wf", "d"+string(rune('0'+m)), deadLettered, time.Duration(m)*time.Minute, int64(i)))
	}
	h.update(putActivities(as...))
	h.written()

	// page reads up to two dead letters after cursor.
	page := func(cursor []byte) ([]string, []byte) {
		var ids []string
		var last []byte
		h.view(func(tx engine.Tx) error {
			var err error
			last, err = tx.DeadLetters(cursor, func(a *durablev1.ActivityRecord) bool {
				ids = append(ids, a.GetInfo().GetActivityId())
				return len(ids) < 2
			})
			return err
		})
		return ids, last
	}
	ids, c1 := page(nil)
	wantStrings(t, "page 1", ids, []string{"d1", "d2"})

	// Redriving the letter under the cursor must not lose the cursor's place.
	h.update(putActivities(NewActivity("wf", "d2", scheduled, 0, 10)))
	h.written()
	ids, c2 := page(c1)
	wantStrings(t, "page 2", ids, []string{"d3", "d4"})
	ids, c3 := page(c2)
	wantStrings(t, "page 3", ids, []string{"d5"})
	ids, c4 := page(c3)
	wantStrings(t, "page 4", ids, nil)
	if c4 != nil {
		t.Errorf("cursor after an empty page = %x, want nil", c4)
	}

	err := h.s.View(func(tx engine.Tx) error {
		_, err := tx.DeadLetters([]byte("garbage"), func(*durablev1.ActivityRecord) bool { return true })
		return err
	})
	var inv *engine.InvalidError
	if !errors.As(err, &inv) {
		t.Errorf("DeadLetters with a foreign cursor = %v, want *engine.InvalidError", err)
	}
}
