package storetest

import (
	"errors"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// byState renders the activities of a state range as "wf/act", reading all
// of them.
func (h *harness) byState(r engine.StateRange) []string {
	h.t.Helper()
	var out []string
	h.view(func(tx engine.Tx) error {
		_, err := tx.ActivitiesByState(r, nil, func(a *durablev1.ActivityRecord) bool {
			out = append(out, a.GetInfo().GetWorkflowId()+"/"+a.GetInfo().GetActivityId())
			return true
		})
		return err
	})
	return out
}

// testStateIndexFollowsTheRecord walks one activity through its states; the
// state index holds it under exactly the state of its record, after every
// step and a reopen, and drops it with the record.
func testStateIndexFollowsTheRecord(h *harness) {
	t := h.t
	steps := []struct {
		name  string
		state durablev1.ActivityState
	}{
		{"Scheduled", scheduled}, {"Started", started}, {"Retrying", retrying}, {"DeadLettered", deadLettered}, {"Redriven", scheduled},
	}
	for _, st := range steps {
		h.update(putActivities(NewActivity("wf", "1", st.state, time.Second, 1)))
		h.written()
		for _, s := range []durablev1.ActivityState{scheduled, started, retrying, deadLettered} {
			var want []string
			if s == st.state {
				want = []string{"wf/1"}
			}
			wantStrings(t, st.name+": "+s.String(), h.byState(engine.StateRange{State: s}), want)
		}
	}
	h.update(func(tx engine.Tx) error { return tx.DeleteActivity("wf", "1") })
	h.written()
	wantStrings(t, "after delete", h.byState(engine.StateRange{}), nil)
}

func testActivitiesByStateRangesAndCursor(h *harness) {
	t := h.t
	typed := func(a *durablev1.ActivityRecord, typ string) *durablev1.ActivityRecord {
		a.Info.ActivityType = typ
		return a
	}
	h.update(putActivities(
		typed(NewActivity("w2", "1", retrying, time.Second, 1), "Charge"),
		typed(NewActivity("w1", "1", retrying, time.Second, 2), "Charge"),
		typed(NewActivity("w1", "2", retrying, time.Second, 3), "Email"),
		typed(NewActivity("w3", "1", scheduled, time.Second, 4), "Charge"),
		typed(NewActivity("w3", "2", deadLettered, time.Second, 5), "Charge"),
		typed(NewActivity("w4", "1", started, time.Second, 6), "Email"),
	))
	h.written()
	tests := []struct {
		name string
		r    engine.StateRange
		want []string
	}{
		// Within a state, a shorter type sorts first (Email before Charge):
		// the order of the Badger store's length-prefixed keys.
		{"Every", engine.StateRange{}, []string{"w3/1", "w4/1", "w1/2", "w1/1", "w2/1", "w3/2"}},
		{"OneState", engine.StateRange{State: retrying}, []string{"w1/2", "w1/1", "w2/1"}},
		{"StateAndType", engine.StateRange{State: retrying, ActivityType: "Charge"}, []string{"w1/1", "w2/1"}},
		{"TypeInEveryState", engine.StateRange{ActivityType: "Charge"}, []string{"w3/1", "w1/1", "w2/1", "w3/2"}},
		{"NoneOfTheType", engine.StateRange{ActivityType: "Refund"}, nil},
	}
	for _, tt := range tests {
		wantStrings(t, tt.name, h.byState(tt.r), tt.want)

		// Pages of two, each from the cursor of the last: every activity
		// once, in the same order, across the states' ranges.
		var paged []string
		var cursor []byte
		for range 10 {
			var page []string
			h.view(func(tx engine.Tx) error {
				last, err := tx.ActivitiesByState(tt.r, cursor, func(a *durablev1.ActivityRecord) bool {
					page = append(page, a.GetInfo().GetWorkflowId()+"/"+a.GetInfo().GetActivityId())
					return len(page) < 2
				})
				cursor = last
				return err
			})
			paged = append(paged, page...)
			if len(page) < 2 {
				break
			}
		}
		wantStrings(t, tt.name+" in pages", paged, tt.want)
	}

	var cursor, deadLetterCursor []byte
	h.view(func(tx engine.Tx) error {
		var err error
		cursor, err = tx.ActivitiesByState(engine.StateRange{State: retrying}, nil, func(*durablev1.ActivityRecord) bool { return false })
		if err != nil {
			return err
		}
		deadLetterCursor, err = tx.DeadLetters(nil, func(*durablev1.ActivityRecord) bool { return false })
		return err
	})
	var inv *engine.InvalidError
	for name, c := range map[string]struct {
		r      engine.StateRange
		cursor []byte
	}{
		"Garbage":          {engine.StateRange{}, []byte("garbage")},
		"DeadLetterCursor": {engine.StateRange{}, deadLetterCursor},
		"OtherState":       {engine.StateRange{State: scheduled}, cursor},
		"OtherType":        {engine.StateRange{State: retrying, ActivityType: "Charge"}, cursor}, // the cursor is at w1/2, an Email
	} {
		err := h.s.View(func(tx engine.Tx) error {
			_, err := tx.ActivitiesByState(c.r, c.cursor, func(*durablev1.ActivityRecord) bool { return true })
			return err
		})
		if !errors.As(err, &inv) {
			t.Errorf("%s: ActivitiesByState with a foreign cursor = %v, want *engine.InvalidError", name, err)
		}
	}
}

func testDeadLettersInSeeksTheTimeRange(h *harness) {
	t := h.t
	var as []*durablev1.ActivityRecord
	for m := 1; m <= 5; m++ {
		as = append(as, NewActivity("wf", "d"+string(rune('0'+m)), deadLettered, time.Duration(m)*time.Minute, int64(m)))
	}
	h.update(putActivities(as...))
	h.written()
	read := func(r engine.TimeRange, after []byte, limit int) ([]string, []byte) {
		var ids []string
		var last []byte
		h.view(func(tx engine.Tx) error {
			var err error
			last, err = tx.DeadLettersIn(r, after, func(a *durablev1.ActivityRecord) bool {
				ids = append(ids, a.GetInfo().GetActivityId())
				return len(ids) < limit
			})
			return err
		})
		return ids, last
	}
	tests := []struct {
		name string
		r    engine.TimeRange
		want []string
	}{
		{"Open", engine.TimeRange{}, []string{"d1", "d2", "d3", "d4", "d5"}},
		{"FromIsInclusive", engine.TimeRange{From: T0.Add(2 * time.Minute)}, []string{"d2", "d3", "d4", "d5"}},
		{"BeforeIsExclusive", engine.TimeRange{Before: T0.Add(4 * time.Minute)}, []string{"d1", "d2", "d3"}},
		{"Both", engine.TimeRange{From: T0.Add(90 * time.Second), Before: T0.Add(270 * time.Second)}, []string{"d2", "d3", "d4"}},
		{"Empty", engine.TimeRange{From: T0.Add(time.Hour)}, nil},
	}
	for _, tt := range tests {
		got, _ := read(tt.r, nil, 100)
		wantStrings(t, tt.name, got, tt.want)
	}
	// A cursor before From moves up to From; one inside the range goes on.
	r := engine.TimeRange{From: T0.Add(3 * time.Minute)}
	_, early := read(engine.TimeRange{}, nil, 1)
	got, c := read(r, early, 1)
	wantStrings(t, "cursor before the range", got, []string{"d3"})
	got, _ = read(r, c, 100)
	wantStrings(t, "cursor inside the range", got, []string{"d4", "d5"})
}

func finished(wf, id string, outcome string, d time.Duration) *durablev1.FinishedActivity {
	a := NewActivity(wf, id, started, d, 0).GetInfo()
	a.Attempts = []*durablev1.AttemptRecord{
		{Attempt: 1, Identity: "w-1", StartedTime: at(0), EndedTime: at(time.Second), Failure: &durablev1.Failure{Type: "Boom", Message: "down"}},
		{Attempt: 2, Identity: "w-2", StartedTime: at(2 * time.Second), EndedTime: at(d)},
	}
	return &durablev1.FinishedActivity{Activity: a, Outcome: outcome, FinishedTime: at(d)}
}

func testFinishedActivitiesRoundTrip(h *harness) {
	t := h.t
	a2 := finished("wf", "2", "completed", time.Minute)
	a1 := finished("wf", "1", "failed", 2*time.Minute)
	other := finished("wf-other", "1", "workflow_closed", time.Minute)
	h.update(func(tx engine.Tx) error {
		for _, f := range []*durablev1.FinishedActivity{a2, a1, other} {
			if err := tx.PutFinishedActivity(f); err != nil {
				return err
			}
		}
		return nil
	})
	h.written()
	h.view(func(tx engine.Tx) error {
		got, err := tx.FinishedActivities("wf")
		if err != nil {
			return err
		}
		if len(got) != 2 {
			t.Fatalf("FinishedActivities(wf) = %d records, want 2", len(got))
		}
		wantEqual(t, "first", got[0], a1)
		wantEqual(t, "second", got[1], a2)
		none, err := tx.FinishedActivities("w")
		if len(none) != 0 {
			t.Errorf("FinishedActivities(w) = %v, want none", none)
		}
		return err
	})
	// Writing it again under a later time moves its retention entry.
	moved := finished("wf", "2", "completed", time.Hour)
	h.update(func(tx engine.Tx) error { return tx.PutFinishedActivity(moved) })
	h.written()
	h.update(func(tx engine.Tx) error {
		n, err := tx.DeleteFinishedBefore(T0.Add(30*time.Minute), 10)
		if n != 2 {
			t.Errorf("deleted %d before +30m, want 2 (wf/1 and wf-other/1)", n)
		}
		return err
	})
	h.written()
	h.view(func(tx engine.Tx) error {
		got, err := tx.FinishedActivities("wf")
		if len(got) != 1 {
			t.Fatalf("after delete: %d records, want 1", len(got))
		}
		wantEqual(t, "kept", got[0], moved)
		return err
	})
}

func testFinishedDeleteBefore(h *harness) {
	t := h.t
	h.update(func(tx engine.Tx) error {
		for i := range 5 {
			if err := tx.PutFinishedActivity(finished("wf", string(rune('a'+i)), "completed", time.Duration(i+1)*time.Minute)); err != nil {
				return err
			}
		}
		return nil
	})
	h.written()
	deleteBefore := func(d time.Duration, limit int) int {
		var n int
		h.update(func(tx engine.Tx) error {
			var err error
			n, err = tx.DeleteFinishedBefore(T0.Add(d), limit)
			return err
		})
		return n
	}
	if n := deleteBefore(4*time.Minute, 2); n != 2 {
		t.Errorf("first batch deleted %d, want 2 (the limit)", n)
	}
	if n := deleteBefore(4*time.Minute, 0); n != 0 {
		t.Errorf("a zero limit deleted %d", n)
	}
	if n := deleteBefore(4*time.Minute, 10); n != 1 {
		t.Errorf("second batch deleted %d, want 1", n)
	}
	h.written()
	h.view(func(tx engine.Tx) error {
		got, err := tx.FinishedActivities("wf")
		var ids []string
		for _, f := range got {
			ids = append(ids, f.GetActivity().GetActivityId())
		}
		wantStrings(t, "kept", ids, []string{"d", "e"})
		return err
	})
}
