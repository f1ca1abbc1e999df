package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// checkRows is the suite's CheckFunc: the rows derived from the records
// (queue entries, timers, counts, and the query columns beside each record)
// are exactly those the records imply, nothing missing, nothing left over.
func checkRows(t *testing.T, st engine.Store) {
	t.Helper()
	s := st.(*Store)
	ctx := context.Background()
	want := map[string]bool{}
	wantCounts := map[string]int64{}
	add := func(format string, args ...any) { want[fmt.Sprintf(format, args...)] = true }
	entry := func(e engine.QueueEntry) {
		add("queue %d %q %d %d %q %q", e.Kind, e.Queue, nanos(e.Due), e.Seq, e.WorkflowID, e.ActivityID)
	}
	timer := func(tm engine.Timer) { add("timer %d %d %q %q", nanos(tm.Due), tm.Kind, tm.WorkflowID, tm.ID) }

	type row struct {
		key []any
		v   []byte
	}
	read := func(sql string, n int) []row {
		rows, err := s.pool.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			vals, err := r.Values()
			if err != nil {
				return row{}, err
			}
			x := row{key: vals[:n]}
			if len(vals) > n {
				x.v = vals[n].([]byte)
			}
			return x, nil
		})
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}
	str := func(v any) string { return string(v.([]byte)) }

	// The records, and the columns each row holds beside its record.
	got := map[string]bool{}
	for _, r := range read("SELECT running, closed_at, record FROM workflows", 2) {
		w := new(durablev1.WorkflowRecord)
		if err := unmarshal("workflow", r.v, w); err != nil {
			t.Fatal(err)
		}
		id := w.GetInfo().GetWorkflowId()
		running := w.GetInfo().GetStatus() == durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
		var closed any
		if st := w.GetInfo().GetStatus(); st != durablev1.WorkflowStatus_WORKFLOW_STATUS_UNSPECIFIED && !running {
			closed = nanos(w.GetInfo().GetCloseTime().AsTime())
		}
		if r.key[0] != running || r.key[1] != closed {
			t.Errorf("workflow %q: columns running=%v closed_at=%v, the record implies %v and %v", id, r.key[0], r.key[1], running, closed)
		}
		if e, ok := engine.WorkflowQueueEntryOf(w); ok {
			entry(e)
		}
		for _, tm := range engine.WorkflowTimersOf(w) {
			timer(tm)
		}
	}
	for _, r := range read("SELECT state, activity_type, task_queue, dead_lettered_at, record FROM activities", 4) {
		a := new(durablev1.ActivityRecord)
		if err := unmarshal("activity", r.v, a); err != nil {
			t.Fatal(err)
		}
		in := a.GetInfo()
		var dead any
		if engine.IsDeadLetter(a) {
			dead = nanos(in.GetDeadLetteredTime().AsTime())
		}
		if r.key[0] != int16(in.GetState()) || str(r.key[1]) != in.GetActivityType() || str(r.key[2]) != in.GetTaskQueue() || r.key[3] != dead {
			t.Errorf("activity %s/%s: columns %v, the record implies state %d, type %q, queue %q, dead-lettered %v",
				in.GetWorkflowId(), in.GetActivityId(), r.key, in.GetState(), in.GetActivityType(), in.GetTaskQueue(), dead)
		}
		if e, ok := engine.QueueEntryOf(a); ok {
			entry(e)
		}
		for _, tm := range engine.TimersOf(a) {
			timer(tm)
		}
		if in.GetState() != 0 {
			wantCounts[fmt.Sprintf("%d %q", in.GetState(), in.GetTaskQueue())]++
		}
	}
	for _, r := range read("SELECT record FROM user_timers", 0) {
		tr := new(durablev1.TimerRecord)
		if err := unmarshal("timer", r.v, tr); err != nil {
			t.Fatal(err)
		}
		timer(engine.UserTimerOf(tr))
	}

	// The derived rows.
	for _, r := range read("SELECT kind, task_queue, due, seq, workflow_id, activity_id FROM queue", 6) {
		got[fmt.Sprintf("queue %d %q %d %d %q %q", r.key[0], str(r.key[1]), r.key[2], r.key[3], str(r.key[4]), str(r.key[5]))] = true
	}
	for _, r := range read("SELECT due, kind, workflow_id, id FROM timers", 4) {
		got[fmt.Sprintf("timer %d %d %q %q", r.key[0], r.key[1], str(r.key[2]), str(r.key[3]))] = true
	}
	gotCounts := map[string]int64{}
	for _, r := range read("SELECT state, task_queue, sum(n)::bigint FROM activity_counts GROUP BY state, task_queue HAVING sum(n) <> 0", 3) {
		gotCounts[fmt.Sprintf("%d %q", r.key[0], str(r.key[1]))] = r.key[2].(int64)
	}

	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !got[k] {
			t.Errorf("row missing: %s", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if !want[k] {
			t.Errorf("row left over: %s", k)
		}
	}
	if !maps.Equal(gotCounts, wantCounts) {
		t.Errorf("activity counts %v, the records imply %v", gotCounts, wantCounts)
	}
}
