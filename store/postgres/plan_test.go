package postgres

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/store/storetest"
)

// statementLog keeps the statements a store runs, each with the arguments
// of its first run.
type statementLog struct {
	mu   sync.Mutex
	args map[string][]any
}

func (l *statementLog) add(sql string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.args[sql]; !seen {
		l.args[sql] = args
	}
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.add(d.SQL, d.Args)
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (l *statementLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	l.add(d.SQL, d.Args)
}

func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestStatements_PlannedForAnyArgumentsUseIndexes runs the store's reads,
// lists, writes and claims, then reads the plan PostgreSQL keeps for each
// statement the store ran (see planCacheMode: a plan made once for any
// arguments): none may read one of the big tables whole.
//
// A connection keeps the plan it made at a statement's first run, so the
// tables' size then decides it. OnFullTables plans on tables of 20,000
// analyzed rows; OnEmptyTables plans on the empty tables of a new database,
// fills them (no ANALYZE: autovacuum has not come by yet) and reads the
// plans the connection kept, as a new deployment runs for its first minute;
// OnVacuumedEmptyTables plans after autovacuum recorded the tables empty,
// as a quiet deployment's often are before a burst (plannerSettings).
func TestStatements_PlannedForAnyArgumentsUseIndexes(t *testing.T) {
	t.Parallel()
	t.Run("OnFullTables", func(t *testing.T) {
		t.Parallel()
		log := &statementLog{args: map[string][]any{}}
		s := openPlanned(t, log)
		fillPlanTables(t, s, true)
		runEveryStatement(t, s)
		checkPlans(t, log, func(sql string, args []any) string { return explain(t, s, sql, args...) })
	})
	for _, c := range []struct {
		name   string
		vacuum bool
	}{{"OnEmptyTables", false}, {"OnVacuumedEmptyTables", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			log := &statementLog{args: map[string][]any{}}
			s := openPlanned(t, log)
			if c.vacuum {
				if _, err := s.pool.Exec(context.Background(), "VACUUM ANALYZE"); err != nil {
					t.Fatal(err)
				}
			}
			runEveryStatement(t, s)
			fillPlanTables(t, s, false)
			runEveryStatement(t, s)
			checkPlans(t, log, func(sql string, args []any) string { return explainKept(t, s, sql, args...) })
		})
	}
}

// openPlanned opens a store on a new database with one connection, so
// that every statement is planned, and its plan kept, on that one.
func openPlanned(t *testing.T, log *statementLog) *Store {
	t.Helper()
	s, err := Open(testpg.Database(t), Options{MaxConns: 1, Node: "a", tracer: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var mode string
	if err := s.pool.QueryRow(context.Background(), "SHOW plan_cache_mode").Scan(&mode); err != nil || mode != planCacheMode {
		t.Fatalf("plan_cache_mode = %q, %v; want %q", mode, err, planCacheMode)
	}
	return s
}

// fillPlanTables puts 20,000 rows in each big table, beside any the
// statements wrote, and analyzes them if asked.
func fillPlanTables(t *testing.T, s *Store, analyze bool) {
	t.Helper()
	sql := fmt.Sprintf(`
		INSERT INTO workflows (workflow_id, record, running, closed_at)
			SELECT ('wf' || i)::bytea, '', i %% 2 = 0, CASE WHEN i %% 2 = 1 THEN %[1]d + i END FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
		INSERT INTO history (workflow_id, event_id, event)
			SELECT ('wf' || (i / 10))::bytea, i %% 10 + 1, '' FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
		INSERT INTO activities (workflow_id, activity_id, record, state, activity_type, task_queue, dead_lettered_at)
			SELECT ('wf' || (i / 10))::bytea, ('a' || i)::bytea, '', i %% 4 + 1, ('T' || (i %% 7))::bytea, ('q' || (i %% 20))::bytea,
				CASE WHEN i %% 4 = 3 THEN %[1]d + i END FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
		INSERT INTO activity_ids (workflow_id, activity_id) SELECT ('wf' || (i / 10))::bytea, ('a' || i)::bytea FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
		INSERT INTO finished_activities (workflow_id, activity_id, finished_at, record)
			SELECT ('wf' || (i / 10))::bytea, ('f' || i)::bytea, %[1]d + i, '' FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
		INSERT INTO queue (kind, task_queue, due, seq, workflow_id, activity_id)
			SELECT 2, ('q' || (i %% 20))::bytea, %[1]d + i * 1000, i, ('wf' || (i / 10))::bytea, ('a' || i)::bytea FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
		INSERT INTO timers (due, kind, workflow_id, id)
			SELECT %[1]d + i * 1000, 1, ('wf' || (i / 10))::bytea, ('a' || i)::bytea FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
		INSERT INTO latency_hours (activity_type, hour, node, record)
			SELECT ('T' || (i %% 7))::bytea, %[1]d + (i / 7) * 3600000000000, 'a', '' FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
		INSERT INTO audit (at, id, record) SELECT %[1]d + i, i, '' FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
		INSERT INTO operations (seq, record) SELECT i, '' FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
		INSERT INTO operation_items (seq, idx, ref) SELECT i / 100, i %% 100, '' FROM generate_series(1, 20000) i ON CONFLICT DO NOTHING;
`, storetest.T0.UnixNano())
	if analyze {
		sql += "; ANALYZE"
	}
	if _, err := s.pool.Exec(context.Background(), sql); err != nil {
		t.Fatal(err)
	}
}

// runEveryStatement runs each kind of statement the store has.
func runEveryStatement(t *testing.T, s *Store) {
	t.Helper()
	at := func(d time.Duration) time.Time { return storetest.T0.Add(d) }
	some := func(n *int) bool { *n++; return *n < 300 }
	errs := func(es ...error) error {
		for _, e := range es {
			if e != nil && !strings.Contains(e.Error(), "not found") {
				return e
			}
		}
		return nil
	}
	err := s.View(func(tx engine.Tx) error {
		var n [20]int
		_, e1 := tx.GetWorkflow("wf5")
		_, e2 := tx.ListWorkflows("wf1", 10)
		e3 := tx.RunningWorkflows(func(*durablev1.WorkflowRecord) bool { return some(&n[0]) })
		e4 := tx.ClosedWorkflows(at(time.Millisecond), func(*durablev1.WorkflowRecord) bool { return some(&n[1]) })
		_, e5 := tx.History("wf5")
		_, e6 := tx.HistoryRange("wf5", 2, 5)
		_, e7 := tx.GetActivity("wf5", "a55")
		_, e8 := tx.Activities("wf5")
		e9 := tx.ScanActivities(func(*durablev1.ActivityRecord) bool { return some(&n[2]) })
		_, e10 := tx.Queued(engine.ActivityTask, "q3", 10)
		_, e11 := tx.DueTimers(10)
		e12 := tx.QueuedIn(engine.ActivityTask, engine.TimeRange{From: at(time.Second), Before: at(time.Hour)}, func(engine.QueueEntry) bool { return some(&n[3]) })
		e13 := tx.TimersIn(engine.TimeRange{From: at(time.Second), Before: at(time.Hour)}, func(engine.Timer) bool { return some(&n[4]) })
		_, e14 := tx.DeadLettersIn(engine.TimeRange{From: at(time.Microsecond)}, nil, func(*durablev1.ActivityRecord) bool { return some(&n[5]) })
		_, e15 := tx.ActivitiesByState(engine.StateRange{State: durablev1.ActivityState_ACTIVITY_STATE_STARTED}, nil, func(*durablev1.ActivityRecord) bool { return some(&n[6]) })
		_, e16 := tx.ActivitiesByState(engine.StateRange{State: durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, ActivityType: "T3"}, nil, func(*durablev1.ActivityRecord) bool { return some(&n[7]) })
		_, e17 := tx.ActivitiesByState(engine.StateRange{}, nil, func(*durablev1.ActivityRecord) bool { return some(&n[8]) })
		_, e18 := tx.FinishedActivities("wf5")
		_, e19 := tx.GetLatencyHour("T3", at(0))
		e20 := tx.LatencyHours(at(time.Hour), func(*durablev1.LatencyRecord) bool { return some(&n[9]) })
		_, e21 := tx.LatencyHoursBefore(at(10*time.Hour), 10)
		_, e22 := tx.AuditRecords(nil, func(*durablev1.AuditRecord) bool { return some(&n[10]) })
		_, e23 := tx.Operations(nil, func(*durablev1.OperationRecord) bool { return some(&n[11]) })
		_, e24 := tx.OperationItems(5, 0, 10)
		_, e25 := tx.GetOperation(5)
		_, e26 := tx.ActivityCounts(func(string, durablev1.ActivityState, int64) bool { return true })
		return errs(e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11, e12, e13, e14, e15, e16, e17, e18, e19, e20, e21, e22, e23, e24, e25, e26)
	})
	if err != nil {
		t.Fatal(err)
	}
	finished := func(wf, id string) *durablev1.FinishedActivity {
		return &durablev1.FinishedActivity{Activity: storetest.NewActivity(wf, id, durablev1.ActivityState_ACTIVITY_STATE_STARTED, 0, 0).GetInfo(), FinishedTime: timestamppb.New(at(time.Hour))}
	}
	update(t, s, func(tx engine.SharedTx) error {
		var es []error
		// Each kind of write once (a single-row statement) and several
		// times in one statement.
		// The records read first, so that the writes wait together: some
		// at once, as a batch of transitions reads them.
		if err := tx.(engine.Prefetcher).Prefetch([]engine.RecordKey{{WorkflowID: "wf7"}, {WorkflowID: "wf8"},
			{WorkflowID: "wf7", ActivityID: "a70"}, {WorkflowID: "wf8", ActivityID: "a80"}}); err != nil {
			return err
		}
		for i, wf := range []string{"wf7", "wf8", "wf9"} {
			for j := range i + 1 {
				for _, id := range []string{fmt.Sprintf("a%d", 70+10*i+j), fmt.Sprintf("a%d", 75+10*i+j)} {
					if _, err := tx.GetActivity(wf, id); errs(err) != nil {
						return err
					}
				}
			}
		}
		for i, wf := range []string{"wf7", "wf8", "wf9"} {
			for j := range i + 1 {
				id := fmt.Sprintf("a%d", 70+10*i+j)
				es = append(es, tx.PutActivity(storetest.NewActivity(wf, id, durablev1.ActivityState_ACTIVITY_STATE_STARTED, time.Minute, 0)),
					tx.DeleteActivity(wf, fmt.Sprintf("a%d", 75+10*i+j)),
					tx.PutFinishedActivity(finished(wf, "g"+id)),
					tx.PutTimer(&durablev1.TimerRecord{WorkflowId: wf, TimerId: id, FireTime: timestamppb.New(at(time.Hour))}),
					tx.AppendEvents(wf, []*durablev1.HistoryEvent{{EventId: int64(100 + j)}}))
			}
			w := storetest.NewWorkflow(wf, durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_SCHEDULED, time.Second, int64(40000+i))
			es = append(es, tx.PutWorkflow(w),
				tx.PutLatencyHour(&durablev1.LatencyRecord{ActivityType: fmt.Sprint("T", i), Hour: timestamppb.New(at(0)), Attempts: 1}))
		}
		// New activities, their ids asked for first (twice of a workflow
		// reads its lists).
		for i, wf := range []string{"wf7", "wf8", "wf9"} {
			for j := range i + 1 {
				id := fmt.Sprintf("newa%d", 70+10*i+j)
				_, err := tx.UseActivityID(wf, id)
				es = append(es, err, tx.PutActivity(storetest.NewActivity(wf, id, durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, time.Minute, int64(30000+j))))
			}
		}
		_, err := tx.GetLatencyHour("T3", at(0))
		es = append(es, err)
		_, err = tx.DeleteFinishedBefore(at(time.Millisecond), 10)
		es = append(es, err)
		_, err = tx.DeleteAuditBefore(at(time.Millisecond), 10)
		es = append(es, err)
		_, err = tx.DeleteOperationItems(7, 10)
		es = append(es, err, tx.DeleteTimer("wf7", "a70"), tx.DeleteLatencyHour("T4", at(0)), tx.DeleteOperation(9))
		_, err = tx.ClaimQueued(engine.ActivityTask, "q3", at(time.Minute), 5)
		es = append(es, err)
		_, err = tx.ClaimTimers(at(time.Minute), 5)
		es = append(es, err)
		_, _, err = tx.NextTimer(at(time.Minute))
		es = append(es, err)
		return errs(es...)
	})

}

// checkPlans fails t for each statement in log whose plan, as plan gives
// it, reads one of the big tables whole.
func checkPlans(t *testing.T, log *statementLog, plan func(sql string, args []any) string) {
	t.Helper()
	// Not latency_hours: a row per activity type, hour and node, it stays
	// small, and a sweep of old hours reads it whole whatever the plan.
	big := []string{"workflows", "history", "activities", "activity_ids", "finished_activities", "queue", "timers",
		"audit", "operations", "operation_items"}
	seqScan := regexp.MustCompile(`Seq Scan on (\w+)`)
	log.mu.Lock()
	sqls := slices.Sorted(func(yield func(string) bool) {
		for sql := range log.args {
			if !yield(sql) {
				return
			}
		}
	})
	log.mu.Unlock()
	explained := 0
	for _, sql := range sqls {
		word := strings.ToUpper(strings.Fields(strings.TrimLeft(sql, "( \t\n"))[0])
		if !slices.Contains([]string{"SELECT", "INSERT", "UPDATE", "DELETE", "WITH"}, word) || strings.Contains(sql, "pg_") || strings.Contains(sql, ";") {
			continue
		}
		explained++
		p := plan(sql, log.args[sql])
		for _, m := range seqScan.FindAllStringSubmatch(p, -1) {
			if slices.Contains(big, m[1]) {
				t.Errorf("the plan reads %s whole:\n%s\n%s", m[1], sql, p)
			}
		}
	}
	if explained < 40 {
		t.Errorf("%d statements explained; the store ran more than that", explained)
	}
}

// TestOpen_SetsThePlannerSettingsUnlessTheDSNDoes: every connection of the
// store runs with plannerSettings, and a setting the DSN names keeps the
// DSN's value.
func TestOpen_SetsThePlannerSettingsUnlessTheDSNDoes(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	for _, c := range []struct {
		name string
		dsn  string
		want map[string]string
	}{
		{"Default", dsn, plannerSettings},
		{"SetInTheDSN", dsn + " enable_seqscan=on jit=on", map[string]string{
			"plan_cache_mode": planCacheMode, "enable_seqscan": "on", "enable_hashjoin": "off", "enable_mergejoin": "off", "jit": "on"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(c.dsn, Options{MaxConns: 2, Node: "n-" + strings.ToLower(c.name)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for name, want := range c.want {
				var got string
				if err := s.pool.QueryRow(context.Background(), "SHOW "+name).Scan(&got); err != nil || got != want {
					t.Errorf("%s = %q, %v; want %q", name, got, err, want)
				}
			}
		})
	}
}
