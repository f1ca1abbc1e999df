package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// render shows merged writes one statement a line: "put table row; row"
// or "del table key; key", each value as text.
func render(ms []mergedWrite) []string {
	var out []string
	for _, m := range ms {
		op := "put"
		if m.del {
			op = "del"
		}
		rows := make([]string, len(m.rows))
		for i, row := range m.rows {
			vals := make([]string, len(row))
			for j, v := range row {
				switch v := v.(type) {
				case []byte:
					vals[j] = string(v)
				case *int64:
					vals[j] = "NULL"
					if v != nil {
						vals[j] = fmt.Sprint(*v)
					}
				default:
					vals[j] = fmt.Sprint(v)
				}
			}
			rows[i] = strings.Join(vals, " ")
		}
		out = append(out, fmt.Sprintf("%s %s %s", op, m.table.name, strings.Join(rows, "; ")))
	}
	return out
}

// Writes as the store's calls make them.
func putWF(id, v string) queuedWrite {
	return queuedWrite{what: "put workflow " + id, table: workflowsTable, row: []any{b(id), b(v), true, (*int64)(nil)}}
}

func putAct(wf, id, v string) queuedWrite {
	return queuedWrite{what: "put activity " + wf + "/" + id, table: activitiesTable,
		row: []any{b(wf), b(id), b(v), int16(1), b("T"), b("q"), (*int64)(nil)}}
}

func delAct(wf, id string) queuedWrite {
	return queuedWrite{what: "delete activity " + wf + "/" + id, table: activitiesTable, del: true, row: []any{b(wf), b(id)}}
}

func withWhat(what string, f func(*writeSet)) []queuedWrite {
	ws := &writeSet{what: what}
	f(ws)
	return ws.ws
}

func entry(wf, id string, seq int64) engine.QueueEntry {
	return engine.QueueEntry{Kind: engine.ActivityTask, Queue: "q", Due: time.Unix(0, 5), Seq: seq, WorkflowID: wf, ActivityID: id}
}

func timer(wf, id string, kind engine.TimerKind, due int64) engine.Timer {
	return engine.Timer{Due: time.Unix(0, due), Kind: kind, WorkflowID: wf, ID: id}
}

func TestMergeWrites(t *testing.T) {
	cat := func(wss ...[]queuedWrite) []queuedWrite {
		var out []queuedWrite
		for _, ws := range wss {
			out = append(out, ws...)
		}
		return out
	}
	tests := []struct {
		name string
		in   []queuedWrite
		want []string
	}{
		{
			name: "nothing sends nothing",
		},
		{
			name: "the rows of a table go in one statement, keys in the order first written",
			in:   []queuedWrite{putAct("w", "b", "1"), putAct("w", "a", "1"), putAct("v", "a", "1")},
			want: []string{"put activities w b 1 1 T q NULL; w a 1 1 T q NULL; v a 1 1 T q NULL"},
		},
		{
			name: "a key written several times goes once, as last written",
			in:   []queuedWrite{putAct("w", "a", "1"), putAct("w", "b", "1"), putAct("w", "a", "2"), putAct("w", "a", "3")},
			want: []string{"put activities w a 3 1 T q NULL; w b 1 1 T q NULL"},
		},
		{
			name: "a delete after an upsert is a delete",
			in:   []queuedWrite{putAct("w", "a", "1"), putAct("w", "a", "2"), delAct("w", "a")},
			want: []string{"del activities w a"},
		},
		{
			name: "an upsert after a delete is the upsert",
			in:   []queuedWrite{delAct("w", "a"), putAct("w", "a", "2")},
			want: []string{"put activities w a 2 1 T q NULL"},
		},
		{
			name: "a delete between upserts leaves the last upsert",
			in:   []queuedWrite{putAct("w", "a", "1"), delAct("w", "a"), putAct("w", "a", "3"), delAct("w", "b")},
			want: []string{"del activities w b", "put activities w a 3 1 T q NULL"},
		},
		{
			name: "a key is its every key column, and only those",
			in: []queuedWrite{putAct("w", "a", "1"), putAct("wa", "", "1"), putAct("", "wa", "1"),
				putWF("w", "1"), putWF("w", "2")},
			want: []string{"put workflows w 2 true NULL", "put activities w a 1 1 T q NULL; wa  1 1 T q NULL;  wa 1 1 T q NULL"},
		},
		{
			name: "tables go in one fixed order, each table's deletes before its puts",
			in: cat(
				withWhat("x", func(ws *writeSet) { ws.insertTimer(timer("w", "a", engine.ActivityLeaseTimer, 9)) }),
				[]queuedWrite{delAct("w", "b"), putAct("w", "a", "1"), putWF("w", "1")},
				withWhat("x", func(ws *writeSet) { ws.insertEntry(entry("w", "a", 1)) }),
			),
			want: []string{
				"put workflows w 1 true NULL",
				"del activities w b",
				"put activities w a 1 1 T q NULL",
				"put queue 2 q 5 1 w a",
				"put timers 9 1 w a",
			},
		},
		{
			name: "an owner's delete clears its inserts before it and goes before those after",
			in: withWhat("x", func(ws *writeSet) {
				ws.insertEntry(entry("w", "a", 1))
				ws.insertEntry(entry("w", "b", 2))
				ws.deleteEntries("w", "a", engine.ActivityTask)
				ws.insertEntry(entry("w", "a", 3))
				ws.deleteEntries("w", "c", engine.ActivityTask)
				ws.deleteEntries("w", "a", engine.ActivityTask)
				ws.insertEntry(entry("w", "a", 4))
				ws.insertEntry(entry("w", "a", 5))
			}),
			want: []string{"del queue w a 2; w c 2", "put queue 2 q 5 4 w a; 2 q 5 5 w a; 2 q 5 2 w b"},
		},
		{
			name: "an owner's inserts without a delete all stay",
			in: withWhat("x", func(ws *writeSet) {
				ws.insertTimer(timer("w", "a", engine.ScheduleToStartTimer, 1))
				ws.insertTimer(timer("w", "a", engine.ScheduleToCloseTimer, 2))
			}),
			want: []string{"put timers 1 2 w a; 2 3 w a"},
		},
		{
			name: "a delete of a record's timers takes every kind of its group, and no other group's",
			in: withWhat("x", func(ws *writeSet) {
				ws.insertTimer(timer("w", "a", engine.ScheduleToStartTimer, 1))
				ws.insertTimer(timer("w", "a", engine.UserTimer, 7))
				ws.insertTimer(timer("w", "", engine.WorkflowTaskLeaseTimer, 8))
				ws.deleteTimers("w", "a", engine.ActivityLeaseTimer)
				ws.insertTimer(timer("w", "a", engine.ActivityLeaseTimer, 2))
			}),
			want: []string{"del timers w a 1; w a 2; w a 3", "put timers 2 1 w a; 7 5 w a; 8 4 w "},
		},
		{
			name: "the queue's owners are per kind",
			in: withWhat("x", func(ws *writeSet) {
				ws.insertEntry(engine.QueueEntry{Kind: engine.WorkflowTask, Queue: "q", Seq: 1, WorkflowID: "w"})
				ws.deleteEntries("w", "", engine.ActivityTask)
			}),
			want: []string{"del queue w  2", "put queue 1 q 0 1 w "},
		},
		{
			name: "an id used twice is inserted once",
			in: cat(
				withWhat("x", func(ws *writeSet) { ws.put(activityIDsTable, b("w"), b("a")) }),
				withWhat("y", func(ws *writeSet) { ws.put(activityIDsTable, b("w"), b("a")) }),
			),
			want: []string{"put activity_ids w a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := render(mergeWrites(tt.in))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("mergeWrites:\n got  %q\n want %q", got, tt.want)
			}
		})
	}
}

func TestMergeWrites_NameTheWritesTheyCarry(t *testing.T) {
	var in []queuedWrite
	for i := range 6 {
		in = append(in, putAct("w", fmt.Sprint(i), "1"))
	}
	in = append(in, putAct("w", "0", "2"), delAct("w", "9"))
	var got []string
	for _, m := range mergeWrites(in) {
		got = append(got, m.what())
	}
	want := []string{
		"delete activity w/9",
		"put activity w/0, put activity w/1, put activity w/2 and 3 more",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("whats:\n got  %q\n want %q", got, want)
	}
}

func TestMergedWrite_OneRowIsASingleRowStatementAndMoreAreArrays(t *testing.T) {
	one := mergeWrites([]queuedWrite{putAct("w", "a", "1")})[0]
	sql, args := one.statement()
	if want := "INSERT INTO activities (workflow_id, activity_id, record, state, activity_type, task_queue, dead_lettered_at) " +
		"VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (workflow_id, activity_id) DO UPDATE SET record = excluded.record, " +
		"state = excluded.state, activity_type = excluded.activity_type, task_queue = excluded.task_queue, " +
		"dead_lettered_at = excluded.dead_lettered_at"; sql != want {
		t.Errorf("one row:\n got  %s\n want %s", sql, want)
	}
	if !reflect.DeepEqual(args, one.rows[0]) {
		t.Errorf("one row's arguments: %v, want the row", args)
	}
	dead := int64(4)
	two := putAct("w", "b", "2")
	two.row[6] = &dead
	many := mergeWrites([]queuedWrite{putAct("w", "a", "1"), two})[0]
	sql, args = many.statement()
	if !strings.Contains(sql, "SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::smallint[], $5::bytea[], $6::bytea[], $7::bigint[])") {
		t.Errorf("two rows: %s", sql)
	}
	wantArgs := []any{[][]byte{b("w"), b("w")}, [][]byte{b("a"), b("b")}, [][]byte{b("1"), b("2")}, []int16{1, 1},
		[][]byte{b("T"), b("T")}, [][]byte{b("q"), b("q")}, []*int64{nil, &dead}}
	if !reflect.DeepEqual(args, wantArgs) {
		t.Errorf("two rows' arguments:\n got  %v\n want %v", args, wantArgs)
	}
	sql, _ = mergeWrites([]queuedWrite{delAct("w", "a"), delAct("w", "b")})[0].statement()
	if want := "DELETE FROM activities t USING (SELECT x.ctid FROM unnest($1::bytea[], $2::bytea[]) AS d (workflow_id, activity_id), " +
		"LATERAL (SELECT ctid FROM activities WHERE workflow_id = d.workflow_id AND activity_id = d.activity_id OFFSET 0) x) k " +
		"WHERE t.ctid = k.ctid"; sql != want {
		t.Errorf("two deletes:\n got  %s\n want %s", sql, want)
	}
}

func TestCountStatements_SumOnceAndSkipWhatDidNotMove(t *testing.T) {
	scheduled, started := durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, durablev1.ActivityState_ACTIVITY_STATE_STARTED
	if got := countStatements(map[countRef]int64{{queue: "q", state: scheduled}: 0}); got != nil {
		t.Errorf("no move: %v, want no statement", got)
	}
	got := countStatements(map[countRef]int64{
		{queue: "q", state: started}:   2,
		{queue: "q", state: scheduled}: -3,
		{queue: "p", state: scheduled}: 0,
		{queue: "a", state: started}:   1,
	})
	want := []countStatement{
		{sql: addCountsSQL, args: []any{[]int16{int16(scheduled), int16(started), int16(started)}, [][]byte{b("q"), b("a"), b("q")}, []int64{-3, 1, 2}}},
		{sql: dropZeroCountsSQL, args: []any{[]int16{int16(scheduled), int16(started), int16(started)}, [][]byte{b("q"), b("a"), b("q")}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("countStatements:\n got  %v\n want %v", got, want)
	}
}

// pendingActivity is an activity waiting on its queue (seq orders the
// queue), with a schedule-to-close timer; started, it holds a lease
// instead of its queue entry.
func pendingActivity(wf, id string, seq int64, started bool) *durablev1.ActivityRecord {
	a := &durablev1.ActivityRecord{Seq: seq, Info: &durablev1.PendingActivity{
		WorkflowId: wf, ActivityId: id, TaskQueue: "q", ActivityType: "T",
		State:           durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED,
		NextAttemptTime: timestamppb.New(time.Unix(10, 0)),
		ExpirationTime:  timestamppb.New(time.Unix(100, 0)),
	}}
	if started {
		a.Info.State = durablev1.ActivityState_ACTIVITY_STATE_STARTED
		a.Info.LeaseDeadline = timestamppb.New(time.Unix(20+seq, 0))
	}
	return a
}

// statements returns the statements fn's transaction sent.
func statements(t *testing.T, s *Store, fn func(engine.Tx) error) int64 {
	t.Helper()
	before := s.statements.Load()
	if err := s.Update(fn); err != nil {
		t.Fatal(err)
	}
	return s.statements.Load() - before
}

func TestUpdate_WritesOfATableGoAsOneStatement(t *testing.T) {
	t.Parallel()
	s := open(t, testpg.Database(t))
	const n = 16
	keys := make([]engine.RecordKey, n)
	for i := range keys {
		keys[i] = engine.RecordKey{WorkflowID: "w", ActivityID: fmt.Sprint(i)}
	}
	// Sixteen activities scheduled, each with its queue entry, its timer,
	// its id and its count: a row each in five tables.
	got := statements(t, s, func(etx engine.Tx) error {
		tx := etx.(*tx)
		if err := tx.Prefetch(keys); err != nil {
			return err
		}
		for i, k := range keys {
			if err := tx.writeOne("activity id", activityIDsTable, b(k.WorkflowID), b(k.ActivityID)); err != nil {
				return err
			}
			if err := tx.PutActivity(pendingActivity(k.WorkflowID, k.ActivityID, int64(i), false)); err != nil {
				return err
			}
		}
		return nil
	})
	// begin, the prefetch; then one statement each for the activities,
	// their ids, queue entries and timers, two for the counts, and the
	// commit. One by one, the writes alone were 64.
	if want := int64(2 + 4 + 2 + 1); got != want {
		t.Errorf("the transaction sent %d statements, want %d", got, want)
	}
	// Started, every one rewrites its activity, deletes its queue entry
	// and inserts its lease timer (its schedule-to-close timer stays).
	got = statements(t, s, func(tx engine.Tx) error {
		if err := tx.(engine.Prefetcher).Prefetch(keys); err != nil {
			return err
		}
		for i, k := range keys {
			if err := tx.PutActivity(pendingActivity(k.WorkflowID, k.ActivityID, int64(i), true)); err != nil {
				return err
			}
		}
		return nil
	})
	if want := int64(2 + 4 + 2 + 1); got != want { // activities, queue deleted, timers deleted and inserted
		t.Errorf("starting them sent %d statements, want %d", got, want)
	}
	checkRows(t, s)
}

func TestUpdate_ARecordWrittenSeveralTimesBeforeAStatementEndsAsLastWritten(t *testing.T) {
	t.Parallel()
	s := open(t, testpg.Database(t))
	keys := []engine.RecordKey{{WorkflowID: "w", ActivityID: "a"}, {WorkflowID: "w", ActivityID: "b"}, {WorkflowID: "w", ActivityID: "c"}}
	trips(t, s, func(tx engine.Tx) error {
		return tx.PutActivity(pendingActivity("w", "c", 9, false))
	})
	n := trips(t, s, func(tx engine.Tx) error {
		if err := tx.(engine.Prefetcher).Prefetch(keys); err != nil {
			return err
		}
		// a: scheduled, started, deleted, scheduled again; b: scheduled,
		// then deleted; c: deleted, then written twice.
		steps := []func() error{
			func() error { return tx.PutActivity(pendingActivity("w", "a", 1, false)) },
			func() error { return tx.PutActivity(pendingActivity("w", "b", 2, false)) },
			func() error { return tx.PutActivity(pendingActivity("w", "a", 1, true)) },
			func() error { return tx.DeleteActivity("w", "a") },
			func() error { return tx.DeleteActivity("w", "c") },
			func() error { return tx.PutActivity(pendingActivity("w", "a", 3, false)) },
			func() error { return tx.DeleteActivity("w", "b") },
			func() error { return tx.PutActivity(pendingActivity("w", "c", 4, true)) },
			func() error { return tx.PutActivity(pendingActivity("w", "c", 5, false)) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
		return nil
	})
	if n != 2 { // the prefetch, the writes with the commit
		t.Errorf("the transaction took %d round trips, want 2", n)
	}
	err := s.View(func(tx engine.Tx) error {
		for _, want := range []*durablev1.ActivityRecord{pendingActivity("w", "a", 3, false), pendingActivity("w", "c", 5, false)} {
			got, err := tx.GetActivity("w", want.GetInfo().GetActivityId())
			if err != nil {
				return err
			}
			if !proto.Equal(got, want) {
				t.Errorf("activity %s: %v, want %v", want.GetInfo().GetActivityId(), got, want)
			}
		}
		if _, err := tx.GetActivity("w", "b"); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("activity b: %v, want not found", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRows(t, s)
}

// TestMergedDeletes_ProbeTheirIndexes reads the plans of the merged
// deletes on a small table full of dead rows, where a join to the arrays
// would scan the whole table, and on a large analyzed one: each probes
// its index once per key.
func TestMergedDeletes_ProbeTheirIndexes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup string
	}{
		{"small with dead rows", "DELETE FROM queue WHERE seq > 50; DELETE FROM activities WHERE length(activity_id) > 3; DELETE FROM timers WHERE due > 50"},
		{"large", "ANALYZE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, testpg.Database(t))
			ctx := context.Background()
			_, err := s.pool.Exec(ctx, `
				INSERT INTO queue (kind, task_queue, due, seq, workflow_id, activity_id)
					SELECT 2, 'q', i, i, ('w' || (i / 50))::bytea, ('a' || i)::bytea FROM generate_series(1, 20000) i;
				INSERT INTO activities (workflow_id, activity_id, record, state, activity_type, task_queue)
					SELECT ('w' || (i / 50))::bytea, ('a' || i)::bytea, 'x', 1, 'T', 'q' FROM generate_series(1, 20000) i;
				INSERT INTO timers (due, kind, workflow_id, id)
					SELECT i, 1, ('w' || (i / 50))::bytea, ('a' || i)::bytea FROM generate_series(1, 20000) i;
				`+tc.setup)
			if err != nil {
				t.Fatal(err)
			}
			var ws []queuedWrite
			set := &writeSet{}
			for i := 10; i < 18; i++ {
				wf, id := fmt.Sprintf("w%d", i/50), fmt.Sprintf("a%d", i)
				set.deleteEntries(wf, id, engine.ActivityTask)
				set.deleteTimers(wf, id, engine.ActivityLeaseTimer)
				ws = append(ws, delAct(wf, id))
			}
			ws = append(ws, set.ws...)
			indexes := map[string]string{"queue": "queue_owner", "activities": "activities_pkey", "timers": "timers_owner"}
			for _, m := range mergeWrites(ws) {
				sql, args := m.statement()
				plan := explain(t, s, sql, args...)
				if !strings.Contains(plan, "Index Scan using "+indexes[m.table.name]) || !strings.Contains(plan, "Tid Scan") ||
					strings.Contains(plan, "Seq Scan") {
					t.Errorf("the delete from %s does not probe %s per key:\n%s", m.table.name, indexes[m.table.name], plan)
				}
			}
		})
	}
}

// BenchmarkMergeWrites merges what a batch completing 16 activities of
// one workflow writes, and builds its statements: the store's share of
// the merging, per batch.
func BenchmarkMergeWrites(b *testing.B) {
	var ws []queuedWrite
	record := make([]byte, 600)
	for i := range 16 {
		id := fmt.Sprint(i)
		set := &writeSet{what: "complete " + id}
		set.del(activitiesTable, []byte("w"), []byte(id))
		set.deleteTimers("w", id, engine.ActivityLeaseTimer)
		set.put(finishedTable, []byte("w"), []byte(id), int64(i), record)
		set.put(historyTable, []byte("w"), int64(2*i), record)
		set.put(historyTable, []byte("w"), int64(2*i+1), record)
		set.put(workflowsTable, []byte("w"), record, true, (*int64)(nil))
		ws = append(ws, set.ws...)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range mergeWrites(ws) {
			m.statement()
			_ = m.what()
		}
	}
}
