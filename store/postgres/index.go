package postgres

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The orders below are the Badger store's key orders, so that both stores
// list in the same order: a string the Badger key length-prefixes sorts by
// (length, bytes).

const queueOrder = "due, seq, length(workflow_id), workflow_id, activity_id"

func scanQueueEntry(row pgx.CollectableRow) (engine.QueueEntry, error) {
	var kind int16
	var queue, wf, act []byte
	var due int64
	var e engine.QueueEntry
	if err := row.Scan(&kind, &queue, &due, &e.Seq, &wf, &act); err != nil {
		return e, err
	}
	e.Kind, e.Queue, e.Due, e.WorkflowID, e.ActivityID = engine.TaskKind(kind), string(queue), fromNanos(due), string(wf), string(act)
	return e, nil
}

func (t *tx) Queued(kind engine.TaskKind, queue string, limit int) ([]engine.QueueEntry, error) {
	if err := checkPart("task_queue", queue); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	rows, err := t.q.Query(t.ctx, `SELECT kind, task_queue, due, seq, workflow_id, activity_id FROM queue
		WHERE kind = $1 AND length(task_queue) = length($2::bytea) AND task_queue = $2
		ORDER BY `+queueOrder+` LIMIT $3`, int16(kind), b(queue), limit)
	if err != nil {
		return nil, fmt.Errorf("queue %q: %w", queue, err)
	}
	es, err := pgx.CollectRows(rows, scanQueueEntry)
	if err != nil {
		return nil, fmt.Errorf("queue %q: %w", queue, err)
	}
	return es, nil
}

// QueuedIn finds the queues of a kind one index probe each (the next queue
// name after the last), and reads each from the start of r.
func (t *tx) QueuedIn(kind engine.TaskKind, r engine.TimeRange, fn func(engine.QueueEntry) bool) error {
	var queue []byte
	for first := true; ; first = false {
		sql := `SELECT task_queue FROM queue WHERE kind = $1
			ORDER BY kind, length(task_queue), task_queue LIMIT 1`
		args := []any{int16(kind)}
		if !first {
			sql = `SELECT task_queue FROM queue WHERE kind = $1 AND (length(task_queue), task_queue) > (length($2::bytea), $2)
				ORDER BY kind, length(task_queue), task_queue LIMIT 1`
			args = append(args, queue)
		}
		err := t.q.QueryRow(t.ctx, sql, args...).Scan(&queue)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("queues: %w", err)
		}
		more, err := t.queuedIn(kind, string(queue), r, fn)
		if err != nil || !more {
			return err
		}
	}
}

// queuedIn is QueuedIn for one queue; it reports whether fn wants more.
func (t *tx) queuedIn(kind engine.TaskKind, queue string, r engine.TimeRange, fn func(engine.QueueEntry) bool) (bool, error) {
	var last *engine.QueueEntry
	for {
		where := []string{"kind = $1", "length(task_queue) = length($2::bytea)", "task_queue = $2"}
		args := []any{int16(kind), b(queue)}
		where, args = timeCond(where, args, "due", r)
		if last != nil {
			args = append(args, nanos(last.Due), last.Seq, b(last.WorkflowID), b(last.ActivityID))
			n := len(args)
			where = append(where, fmt.Sprintf("(due, seq, length(workflow_id), workflow_id, activity_id) > ($%d, $%d, length($%d::bytea), $%d, $%d)",
				n-3, n-2, n-1, n-1, n))
		}
		rows, err := t.q.Query(t.ctx, `SELECT kind, task_queue, due, seq, workflow_id, activity_id FROM queue
			WHERE `+strings.Join(where, " AND ")+` ORDER BY `+queueOrder+fmt.Sprintf(" LIMIT %d", pageSize), args...)
		if err != nil {
			return false, fmt.Errorf("queue %q: %w", queue, err)
		}
		es, err := pgx.CollectRows(rows, scanQueueEntry)
		if err != nil {
			return false, fmt.Errorf("queue %q: %w", queue, err)
		}
		for _, e := range es {
			if !fn(e) {
				return false, nil
			}
		}
		if len(es) < pageSize {
			return true, nil
		}
		last = &es[len(es)-1]
	}
}

const timerOrder = "due, kind, length(workflow_id), workflow_id, id"

func scanTimer(row pgx.CollectableRow) (engine.Timer, error) {
	var due int64
	var kind int16
	var wf, id []byte
	if err := row.Scan(&due, &kind, &wf, &id); err != nil {
		return engine.Timer{}, err
	}
	return engine.Timer{Due: fromNanos(due), Kind: engine.TimerKind(kind), WorkflowID: string(wf), ID: string(id)}, nil
}

func (t *tx) DueTimers(limit int) ([]engine.Timer, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := t.q.Query(t.ctx, "SELECT due, kind, workflow_id, id FROM timers ORDER BY "+timerOrder+" LIMIT $1", limit)
	if err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	ts, err := pgx.CollectRows(rows, scanTimer)
	if err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	return ts, nil
}

func (t *tx) TimersIn(r engine.TimeRange, fn func(engine.Timer) bool) error {
	var last *engine.Timer
	for {
		where, args := timeCond([]string{"true"}, nil, "due", r)
		if last != nil {
			args = append(args, nanos(last.Due), int16(last.Kind), b(last.WorkflowID), b(last.ID))
			n := len(args)
			where = append(where, fmt.Sprintf("(due, kind, length(workflow_id), workflow_id, id) > ($%d, $%d, length($%d::bytea), $%d, $%d)",
				n-3, n-2, n-1, n-1, n))
		}
		rows, err := t.q.Query(t.ctx, "SELECT due, kind, workflow_id, id FROM timers WHERE "+strings.Join(where, " AND ")+
			" ORDER BY "+timerOrder+fmt.Sprintf(" LIMIT %d", pageSize), args...)
		if err != nil {
			return fmt.Errorf("timers: %w", err)
		}
		ts, err := pgx.CollectRows(rows, scanTimer)
		if err != nil {
			return fmt.Errorf("timers: %w", err)
		}
		for _, tm := range ts {
			if !fn(tm) {
				return nil
			}
		}
		if len(ts) < pageSize {
			return nil
		}
		last = &ts[len(ts)-1]
	}
}

// DeadLetters walks every dead letter.
func (t *tx) DeadLetters(after []byte, fn func(*durablev1.ActivityRecord) bool) ([]byte, error) {
	return t.DeadLettersIn(engine.TimeRange{}, after, fn)
}

// deadLetterRef is where a dead letter stands in the list, and its cursor.
type deadLetterRef struct {
	at     int64
	wf, id string
}

func (r deadLetterRef) cursor() []byte {
	return cursorWriter{cursorDeadLetter}.i64(r.at).s16(r.wf).tail(r.id)
}

func (t *tx) DeadLettersIn(r engine.TimeRange, after []byte, fn func(*durablev1.ActivityRecord) bool) ([]byte, error) {
	var from *deadLetterRef
	if after != nil {
		c := newCursorReader(after, cursorDeadLetter)
		ref := deadLetterRef{at: c.i64(), wf: c.s16(), id: c.tail()}
		if !c.done() {
			return nil, &engine.InvalidError{Field: "next_page_token", Reason: "not a dead-letter cursor"}
		}
		from = &ref
	}
	var last []byte
	for {
		where, args := timeCond([]string{"dead_lettered_at IS NOT NULL"}, nil, "dead_lettered_at", r)
		if from != nil {
			args = append(args, from.at, b(from.wf), b(from.id))
			n := len(args)
			where = append(where, fmt.Sprintf("(dead_lettered_at, length(workflow_id), workflow_id, activity_id) > ($%d, length($%d::bytea), $%d, $%d)",
				n-2, n-1, n-1, n))
		}
		rows, err := t.q.Query(t.ctx, "SELECT dead_lettered_at, workflow_id, activity_id, record FROM activities WHERE "+
			strings.Join(where, " AND ")+" ORDER BY dead_lettered_at, length(workflow_id), workflow_id, activity_id"+
			fmt.Sprintf(" LIMIT %d", pageSize), args...)
		if err != nil {
			return nil, fmt.Errorf("dead letters: %w", err)
		}
		type row struct {
			ref deadLetterRef
			a   *durablev1.ActivityRecord
		}
		page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var wf, id, v []byte
			var x row
			if err := r.Scan(&x.ref.at, &wf, &id, &v); err != nil {
				return x, err
			}
			x.ref.wf, x.ref.id, x.a = string(wf), string(id), new(durablev1.ActivityRecord)
			return x, unmarshal("dead letter", v, x.a)
		})
		if err != nil {
			return nil, fmt.Errorf("dead letters: %w", err)
		}
		for _, x := range page {
			last = x.ref.cursor()
			if !fn(x.a) {
				return last, nil
			}
		}
		if len(page) < pageSize {
			return last, nil
		}
		from = &page[len(page)-1].ref
	}
}

// stateRef is where an activity stands in the state index, and its cursor.
type stateRef struct {
	state        durablev1.ActivityState
	activityType string
	wf, id       string
}

func (r stateRef) cursor() []byte {
	return cursorWriter{cursorState, byte(r.state)}.s16(r.activityType).s16(r.wf).tail(r.id)
}

// ActivitiesByState walks the pending activities over the states r names.
// The cursor must be one of this query's (its state among r's, its type
// r's when r has one); anything else is an *engine.InvalidError rather than
// a silently empty page.
func (t *tx) ActivitiesByState(r engine.StateRange, after []byte, fn func(*durablev1.ActivityRecord) bool) ([]byte, error) {
	if err := checkPart("activity_type", r.ActivityType); err != nil {
		return nil, err
	}
	states := []int16{int16(r.State)}
	if r.State == durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED {
		states = states[:0]
		for v := range durablev1.ActivityState_name {
			if v != 0 {
				states = append(states, int16(v))
			}
		}
		slices.Sort(states)
	}
	var from *stateRef
	if after != nil {
		c := newCursorReader(after, cursorState)
		ref := stateRef{state: durablev1.ActivityState(c.u8()), activityType: c.s16(), wf: c.s16(), id: c.tail()}
		if !c.done() || !slices.Contains(states, int16(ref.state)) || r.ActivityType != "" && ref.activityType != r.ActivityType {
			return nil, &engine.InvalidError{Field: "next_page_token", Reason: "not a page token of this query"}
		}
		from = &ref
	}
	var last []byte
	for {
		where := []string{"state <> 0", "state = ANY($1)"}
		args := []any{states}
		if r.ActivityType != "" {
			args = append(args, b(r.ActivityType))
			where = append(where, "length(activity_type) = length($2::bytea)", "activity_type = $2")
		}
		if from != nil {
			args = append(args, int16(from.state), b(from.activityType), b(from.wf), b(from.id))
			n := len(args)
			where = append(where, fmt.Sprintf(`(state, length(activity_type), activity_type, length(workflow_id), workflow_id, activity_id) >
				($%d, length($%d::bytea), $%d, length($%d::bytea), $%d, $%d)`, n-3, n-2, n-2, n-1, n-1, n))
		}
		rows, err := t.q.Query(t.ctx, "SELECT state, activity_type, workflow_id, activity_id, record FROM activities WHERE "+
			strings.Join(where, " AND ")+
			" ORDER BY state, length(activity_type), activity_type, length(workflow_id), workflow_id, activity_id"+
			fmt.Sprintf(" LIMIT %d", pageSize), args...)
		if err != nil {
			return nil, fmt.Errorf("activities by state: %w", err)
		}
		type row struct {
			ref stateRef
			a   *durablev1.ActivityRecord
		}
		page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var state int16
			var typ, wf, id, v []byte
			var x row
			if err := r.Scan(&state, &typ, &wf, &id, &v); err != nil {
				return x, err
			}
			x.ref = stateRef{state: durablev1.ActivityState(state), activityType: string(typ), wf: string(wf), id: string(id)}
			x.a = new(durablev1.ActivityRecord)
			return x, unmarshal("activity", v, x.a)
		})
		if err != nil {
			return nil, fmt.Errorf("activities by state: %w", err)
		}
		for _, x := range page {
			last = x.ref.cursor()
			if !fn(x.a) {
				return last, nil
			}
		}
		if len(page) < pageSize {
			return last, nil
		}
		from = &page[len(page)-1].ref
	}
}

// RunningWorkflows walks the running workflows in id order.
func (t *tx) RunningWorkflows(fn func(*durablev1.WorkflowRecord) bool) error {
	var last []byte
	for first := true; ; first = false {
		sql := "SELECT workflow_id, record FROM workflows WHERE running ORDER BY workflow_id LIMIT $1"
		args := []any{pageSize}
		if !first {
			sql = "SELECT workflow_id, record FROM workflows WHERE running AND workflow_id > $2 ORDER BY workflow_id LIMIT $1"
			args = append(args, last)
		}
		page, err := t.workflowPage(sql, args, func(id []byte, _ int64) { last = id })
		if err != nil {
			return fmt.Errorf("running workflows: %w", err)
		}
		for _, w := range page {
			if !fn(w) {
				return nil
			}
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

// ClosedWorkflows walks the workflows closed at or after since, the newest
// close first.
func (t *tx) ClosedWorkflows(since time.Time, fn func(*durablev1.WorkflowRecord) bool) error {
	var lastID []byte
	var lastAt int64
	for first := true; ; first = false {
		sql := `SELECT workflow_id, record, closed_at FROM workflows WHERE closed_at IS NOT NULL AND closed_at >= $2
			ORDER BY closed_at DESC, workflow_id DESC LIMIT $1`
		args := []any{pageSize, nanos(since)}
		if !first {
			sql = `SELECT workflow_id, record, closed_at FROM workflows WHERE closed_at IS NOT NULL AND closed_at >= $2
				AND (closed_at, workflow_id) < ($3, $4) ORDER BY closed_at DESC, workflow_id DESC LIMIT $1`
			args = append(args, lastAt, lastID)
		}
		page, err := t.workflowPage(sql, args, func(id []byte, at int64) { lastID, lastAt = id, at })
		if err != nil {
			return fmt.Errorf("closed workflows: %w", err)
		}
		for _, w := range page {
			if !fn(w) {
				return nil
			}
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

// workflowPage reads a page of (workflow_id, record[, closed_at]) rows and
// passes the last row's key to last.
func (t *tx) workflowPage(sql string, args []any, last func(id []byte, closedAt int64)) ([]*durablev1.WorkflowRecord, error) {
	rows, err := t.q.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var out []*durablev1.WorkflowRecord
	_, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		var id, v []byte
		var at int64
		dest := []any{&id, &v}
		if len(row.FieldDescriptions()) == 3 {
			dest = append(dest, &at)
		}
		if err := row.Scan(dest...); err != nil {
			return struct{}{}, err
		}
		w := new(durablev1.WorkflowRecord)
		out = append(out, w)
		last(id, at)
		return struct{}{}, unmarshal("workflow", v, w)
	})
	return out, err
}
