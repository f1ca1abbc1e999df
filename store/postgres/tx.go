package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// defaultPageSize is how many rows a list reads per query before it calls
// back (Store.pageSize; tests make it small to cross page boundaries).
const defaultPageSize = 256

// walk runs a list that is read in pages by key: page returns at most
// size rows after the given one (nil: from the first) in the list's
// order, and each row goes to fn until fn returns false or a page comes back
// short. It returns the last row fn was given (nil when none) and whether
// fn wanted more.
func walk[R any](size int, after *R, page func(after *R) ([]R, error), fn func(R) bool) (last *R, more bool, err error) {
	for {
		rows, err := page(after)
		if err != nil {
			return nil, false, err
		}
		for i := range rows {
			last = &rows[i]
			if !fn(rows[i]) {
				return last, false, nil
			}
		}
		if len(rows) < size {
			return last, true, nil
		}
		after = &rows[len(rows)-1]
	}
}

// collect runs sql and collects its rows with scan.
func collect[R any](t *tx, scan pgx.RowToFunc[R], sql string, args ...any) ([]R, error) {
	rows, err := t.q.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}

// tx is one PostgreSQL transaction seen through engine.Tx. A record and the
// rows derived from it (queue entries, timers) are written in one batch, one
// round trip.
type tx struct {
	ctx      context.Context
	q        querier
	p        *pipe // q, where the writes wait
	readOnly bool
	pageSize int // rows a list reads per query
	s        *Store
	slot     int16 // the rows of the activity counts this transaction writes
	// counts holds the moves of the activity counts not yet written, by
	// queue and state, written once when the transaction ends (flushCounts).
	counts map[countRef]int64
	// payloads are the notifications Notify encoded, sent by finish.
	payloads []string
	notices  int // how many notices Notify took
	// cache holds the records read or written so far (cache.go).
	cache map[recordKey]cachedRecord
	// ids holds what the transaction knows of workflows' activity ids
	// (ids.go).
	ids map[string]*workflowIDs
}

var _ engine.Tx = (*tx)(nil)

// get reads one record column into m; no row is engine.ErrNotFound.
func (t *tx) get(m proto.Message, what, sql string, args ...any) error {
	var v []byte
	err := t.q.QueryRow(t.ctx, sql, args...).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, engine.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return unmarshal(what, v, m)
}

// records reads the record column of every row of a query, in order.
func records[M proto.Message](t *tx, newM func() M, what, sql string, args ...any) ([]M, error) {
	rows, err := t.q.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out []M
	var v []byte
	_, err = pgx.ForEachRow(rows, []any{&v}, func() error {
		m := newM()
		out = append(out, m)
		return unmarshal(what, v, m)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// send runs the statements of a batch, with the writes that wait, in one
// round trip.
func (t *tx) send(what string, batch *pgx.Batch) error {
	if err := t.q.SendBatch(t.ctx, batch).Close(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// write queues the writes of ws to go with the transaction's next round
// trip (pipe.go); a read-only transaction sends them at once, for the
// database to refuse.
func (t *tx) write(ws *writeSet) error {
	if t.readOnly {
		batch := &pgx.Batch{}
		queueMerged(batch, ws.ws)
		return t.q.SendBatch(t.ctx, batch).Close()
	}
	t.p.later(ws.ws)
	return nil
}

// writeOne is write for one row put in tb.
func (t *tx) writeOne(what string, tb *table, row ...any) error {
	ws := &writeSet{what: what}
	ws.put(tb, row...)
	return t.write(ws)
}

func (t *tx) GetWorkflow(id string) (*durablev1.WorkflowRecord, error) {
	if err := checkPart("workflow_id", id); err != nil {
		return nil, err
	}
	w := new(durablev1.WorkflowRecord)
	k := recordKey{table: cacheWorkflow, wf: id}
	c, err := t.cached(k, w, fmt.Sprintf("workflow %q", id), "SELECT record FROM workflows WHERE workflow_id = $1", b(id))
	if err != nil {
		return nil, err
	}
	if c.rows == nil {
		c.rows = workflowRows(w)
		t.keep(k, c)
	}
	return w, nil
}

func (t *tx) PutWorkflow(w *durablev1.WorkflowRecord) error {
	in := w.GetInfo()
	id := in.GetWorkflowId()
	if err := firstErr(checkPart("workflow_id", id), checkPart("task_queue", in.GetTaskQueue())); err != nil {
		return err
	}
	v, err := marshal(w)
	if err != nil {
		return err
	}
	running := in.GetStatus() == durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
	var closedAt *int64
	if st := in.GetStatus(); st != durablev1.WorkflowStatus_WORKFLOW_STATUS_UNSPECIFIED && !running {
		n := nanos(in.GetCloseTime().AsTime())
		closedAt = &n
	}
	ws := &writeSet{what: fmt.Sprintf("put workflow %q", id)}
	ws.put(workflowsTable, b(id), v, running, closedAt)
	k := recordKey{table: cacheWorkflow, wf: id}
	var old *indexRows
	if c, known := t.cache[k]; known {
		old = c.known()
	}
	rows := workflowRows(w)
	replaceRows(ws, old, *rows, id, "", engine.WorkflowTask, engine.WorkflowTaskLeaseTimer)
	if err := t.write(ws); err != nil {
		return err
	}
	t.keep(k, cachedRecord{v: v, ok: true, rows: rows})
	return nil
}

func (t *tx) ListWorkflows(after string, limit int) ([]*durablev1.WorkflowRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	return records(t, newWorkflow, "list workflows",
		"SELECT record FROM workflows WHERE workflow_id > $1 ORDER BY workflow_id LIMIT $2", b(after), limit)
}

func newWorkflow() *durablev1.WorkflowRecord { return new(durablev1.WorkflowRecord) }
func newActivity() *durablev1.ActivityRecord { return new(durablev1.ActivityRecord) }
func newEvent() *durablev1.HistoryEvent      { return new(durablev1.HistoryEvent) }

func (t *tx) AppendEvents(workflowID string, events []*durablev1.HistoryEvent) error {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return err
	}
	ws := &writeSet{what: fmt.Sprintf("append events of workflow %q", workflowID)}
	for _, ev := range events {
		v, err := marshal(ev)
		if err != nil {
			return fmt.Errorf("append event %d of workflow %q: %w", ev.GetEventId(), workflowID, err)
		}
		ws.put(historyTable, b(workflowID), ev.GetEventId(), v)
	}
	return t.write(ws)
}

func (t *tx) History(workflowID string) ([]*durablev1.HistoryEvent, error) {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return nil, err
	}
	return records(t, newEvent, fmt.Sprintf("history of workflow %q", workflowID),
		"SELECT event FROM history WHERE workflow_id = $1 ORDER BY event_id", b(workflowID))
}

func (t *tx) HistoryRange(workflowID string, from, through int64) ([]*durablev1.HistoryEvent, error) {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return nil, err
	}
	from = max(from, 1)
	if through < from {
		return nil, nil
	}
	return records(t, newEvent, fmt.Sprintf("history of workflow %q", workflowID),
		"SELECT event FROM history WHERE workflow_id = $1 AND event_id BETWEEN $2 AND $3 ORDER BY event_id", b(workflowID), from, through)
}

func (t *tx) GetActivity(workflowID, activityID string) (*durablev1.ActivityRecord, error) {
	if err := firstErr(checkPart("workflow_id", workflowID), checkPart("activity_id", activityID)); err != nil {
		return nil, err
	}
	a := new(durablev1.ActivityRecord)
	k := recordKey{table: cacheActivity, wf: workflowID, id: activityID}
	c, err := t.cached(k, a, fmt.Sprintf("activity %s/%s", workflowID, activityID),
		"SELECT record FROM activities WHERE workflow_id = $1 AND activity_id = $2", b(workflowID), b(activityID))
	if err != nil {
		return nil, err
	}
	if c.rows == nil {
		c.count, c.rows = countRefOf(a), activityRows(a)
		t.keep(k, c)
	}
	return a, nil
}

func (t *tx) PutActivity(a *durablev1.ActivityRecord) error {
	in := a.GetInfo()
	wf, id := in.GetWorkflowId(), in.GetActivityId()
	if err := firstErr(checkPart("workflow_id", wf), checkPart("activity_id", id), checkPart("task_queue", in.GetTaskQueue()),
		checkPart("activity_type", in.GetActivityType())); err != nil {
		return err
	}
	v, err := marshal(a)
	if err != nil {
		return err
	}
	var deadAt *int64
	if engine.IsDeadLetter(a) {
		n := nanos(in.GetDeadLetteredTime().AsTime())
		deadAt = &n
	}
	what := fmt.Sprintf("put activity %s/%s", wf, id)
	k := recordKey{table: cacheActivity, wf: wf, id: id}
	to, rows := countRefOf(a), activityRows(a)
	ws := &writeSet{what: what}
	if c, known := t.cache[k]; known {
		// The transaction saw the old row: its count is known.
		ws.put(activitiesTable, b(wf), b(id), v, int16(in.GetState()), b(in.GetActivityType()), b(in.GetTaskQueue()), deadAt)
		replaceActivityRows(ws, wf, id, c.known(), rows)
		if err := t.write(ws); err != nil {
			return err
		}
		var from countRef
		if c.ok {
			from = c.count
			if from.state == 0 {
				// Kept by a claim or an id check, which read the record but
				// not its count: the record says where it is counted.
				old := new(durablev1.ActivityRecord)
				if err := unmarshal(what, c.v, old); err != nil {
					return err
				}
				from = countRefOf(old)
			}
		}
		t.moveCount(from, to)
		t.keep(k, cachedRecord{v: v, ok: true, count: to, rows: rows})
		return nil
	}
	// The old row's queue and state, read before the statement writes the
	// new one, move the activity counts.
	var old *countRef
	batch := &pgx.Batch{}
	batch.Queue(`WITH old AS (SELECT state, task_queue FROM activities WHERE workflow_id = $1 AND activity_id = $2),
		put AS (INSERT INTO activities (workflow_id, activity_id, record, state, activity_type, task_queue, dead_lettered_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (workflow_id, activity_id) DO UPDATE SET record = excluded.record, state = excluded.state,
				activity_type = excluded.activity_type, task_queue = excluded.task_queue, dead_lettered_at = excluded.dead_lettered_at)
		SELECT state, task_queue FROM old`,
		b(wf), b(id), v, int16(in.GetState()), b(in.GetActivityType()), b(in.GetTaskQueue()), deadAt).
		QueryRow(func(row pgx.Row) error {
			var state int16
			var queue []byte
			switch err := row.Scan(&state, &queue); {
			case errors.Is(err, pgx.ErrNoRows):
				return nil
			case err != nil:
				return err
			}
			old = &countRef{queue: string(queue), state: durablev1.ActivityState(state)}
			return nil
		})
	if err := t.send(what, batch); err != nil {
		return err
	}
	// The rows of the queue and timers wait for the next statement.
	replaceActivityRows(ws, wf, id, nil, rows)
	if err := t.write(ws); err != nil {
		return err
	}
	var from countRef
	if old != nil {
		from = *old
	}
	t.moveCount(from, to)
	t.keep(k, cachedRecord{v: v, ok: true, count: to, rows: rows})
	return nil
}

// replaceActivityRows adds to ws the writes that turn an activity's queue
// entry and timers from old (nil: unknown) into new.
func replaceActivityRows(ws *writeSet, wf, id string, old, new *indexRows) {
	replaceRows(ws, old, *new, wf, id, engine.ActivityTask, engine.ActivityLeaseTimer)
}

func (t *tx) DeleteActivity(workflowID, activityID string) error {
	old, err := t.GetActivity(workflowID, activityID)
	if err != nil {
		return err
	}
	ws := &writeSet{what: fmt.Sprintf("delete activity %s/%s", workflowID, activityID)}
	ws.del(activitiesTable, b(workflowID), b(activityID))
	var rows *indexRows
	if c, known := t.cache[recordKey{table: cacheActivity, wf: workflowID, id: activityID}]; known {
		rows = c.known()
	}
	replaceActivityRows(ws, workflowID, activityID, rows, &indexRows{})
	if err := t.write(ws); err != nil {
		return err
	}
	t.moveCount(countRefOf(old), countRef{})
	t.keep(recordKey{table: cacheActivity, wf: workflowID, id: activityID}, cachedRecord{})
	return nil
}

func (t *tx) UseActivityID(workflowID, activityID string) (bool, error) {
	if err := firstErr(checkPart("workflow_id", workflowID), checkPart("activity_id", activityID)); err != nil {
		return false, err
	}
	if !t.readOnly {
		w, err := t.knownIDs(workflowID)
		if err != nil {
			return false, err
		}
		if w.loaded {
			return t.useKnownID(w, workflowID, activityID)
		}
	}
	what := fmt.Sprintf("activity id %s/%s", workflowID, activityID)
	k := recordKey{table: cacheActivity, wf: workflowID, id: activityID}
	if _, known := t.cache[k]; known {
		tag, err := t.q.Exec(t.ctx, "INSERT INTO activity_ids (workflow_id, activity_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
			b(workflowID), b(activityID))
		if err != nil {
			return false, fmt.Errorf("%s: %w", what, err)
		}
		return tag.RowsAffected() == 0, nil
	}
	// The activity is read in the same round trip: scheduling one writes
	// it next, and reads it first to count it.
	var used bool
	var v []byte
	err := t.q.QueryRow(t.ctx, `WITH used AS (INSERT INTO activity_ids (workflow_id, activity_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING true)
		SELECT NOT EXISTS (SELECT FROM used), (SELECT record FROM activities WHERE workflow_id = $1 AND activity_id = $2)`,
		b(workflowID), b(activityID)).Scan(&used, &v)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	t.keep(k, cachedRecord{v: v, ok: v != nil})
	return used, nil
}

func (t *tx) Activities(workflowID string) ([]*durablev1.ActivityRecord, error) {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return nil, err
	}
	return records(t, newActivity, fmt.Sprintf("activities of workflow %q", workflowID),
		"SELECT record FROM activities WHERE workflow_id = $1 ORDER BY activity_id", b(workflowID))
}

// ScanActivities reads every activity in pages, in the Badger store's
// order: by workflow id (shorter first), then activity id.
func (t *tx) ScanActivities(fn func(*durablev1.ActivityRecord) bool) error {
	type row struct {
		wf, id []byte
		a      *durablev1.ActivityRecord
	}
	scan := func(r pgx.CollectableRow) (row, error) {
		var x row
		var v []byte
		if err := r.Scan(&x.wf, &x.id, &v); err != nil {
			return x, err
		}
		x.a = new(durablev1.ActivityRecord)
		return x, unmarshal("activity", v, x.a)
	}
	_, _, err := walk(t.pageSize, nil, func(after *row) ([]row, error) {
		if after == nil {
			return collect(t, scan, `SELECT workflow_id, activity_id, record FROM activities
				ORDER BY length(workflow_id), workflow_id, activity_id LIMIT $1`, t.pageSize)
		}
		return collect(t, scan, `SELECT workflow_id, activity_id, record FROM activities
			WHERE (length(workflow_id), workflow_id, activity_id) > (length($2::bytea), $2, $3)
			ORDER BY length(workflow_id), workflow_id, activity_id LIMIT $1`, t.pageSize, after.wf, after.id)
	}, func(x row) bool { return fn(x.a) })
	if err != nil {
		return fmt.Errorf("scan activities: %w", err)
	}
	return nil
}

func (t *tx) GetTimer(workflowID, timerID string) (*durablev1.TimerRecord, error) {
	if err := firstErr(checkPart("workflow_id", workflowID), checkPart("timer_id", timerID)); err != nil {
		return nil, err
	}
	r := new(durablev1.TimerRecord)
	err := t.get(r, fmt.Sprintf("timer %s/%s", workflowID, timerID),
		"SELECT record FROM user_timers WHERE workflow_id = $1 AND timer_id = $2", b(workflowID), b(timerID))
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (t *tx) PutTimer(r *durablev1.TimerRecord) error {
	wf, id := r.GetWorkflowId(), r.GetTimerId()
	if err := firstErr(checkPart("workflow_id", wf), checkPart("timer_id", id)); err != nil {
		return err
	}
	v, err := marshal(r)
	if err != nil {
		return err
	}
	ws := &writeSet{what: fmt.Sprintf("put timer %s/%s", wf, id)}
	ws.put(userTimersTable, b(wf), b(id), v)
	ws.deleteTimers(wf, id, engine.UserTimer)
	ws.insertTimer(engine.UserTimerOf(r))
	return t.write(ws)
}

func (t *tx) DeleteTimer(workflowID, timerID string) error {
	if _, err := t.GetTimer(workflowID, timerID); err != nil {
		return err
	}
	ws := &writeSet{what: fmt.Sprintf("delete timer %s/%s", workflowID, timerID)}
	ws.del(userTimersTable, b(workflowID), b(timerID))
	ws.deleteTimers(workflowID, timerID, engine.UserTimer)
	return t.write(ws)
}

// Counter returns the engine's id sequence; a new store starts at 0. The
// ids ReserveIDs handed out count too, so that an engine that keeps its ids
// with Counter and SetCounter never reuses one a shared runtime took.
func (t *tx) Counter() (int64, error) {
	var n int64
	err := t.q.QueryRow(t.ctx, `SELECT greatest(coalesce((SELECT n FROM counter), 0),
		(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM ids))`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counter: %w", err)
	}
	return n, nil
}

func (t *tx) SetCounter(n int64) error {
	_, err := t.q.Exec(t.ctx, "INSERT INTO counter (n) VALUES ($1) ON CONFLICT (one) DO UPDATE SET n = excluded.n", n)
	if err != nil {
		return fmt.Errorf("set counter: %w", err)
	}
	return nil
}

// timeCond appends the conditions of r on column col to where, with its
// parameters after those in args.
func timeCond(where []string, args []any, col string, r engine.TimeRange) ([]string, []any) {
	if !r.From.IsZero() {
		args = append(args, nanos(r.From))
		where = append(where, fmt.Sprintf("%s >= $%d", col, len(args)))
	}
	if !r.Before.IsZero() {
		args = append(args, nanos(r.Before))
		where = append(where, fmt.Sprintf("%s < $%d", col, len(args)))
	}
	return where, args
}
