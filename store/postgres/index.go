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
	_, more, err := walk(t.pageSize, nil, func(last *engine.QueueEntry) ([]engine.QueueEntry, error) {
		where := []string{"kind = $1", "length(task_queue) = length($2::bytea)", "task_queue = $2"}
		args := []any{int16(kind), b(queue)}
		where, args = timeCond(where, args, "due", r)
		if last != nil {
			args = append(args, nanos(last.Due), last.Seq, b(last.WorkflowID), b(last.ActivityID))
			n := len(args)
			where = append(where, fmt.Sprintf("(due, seq, length(workflow_id), workflow_id, activity_id) > ($%d, $%d, length($%d::bytea), $%d, $%d)",
				n-3, n-2, n-1, n-1, n))
		}
		return collect(t, scanQueueEntry, `SELECT kind, task_queue, due, seq, workflow_id, activity_id FROM queue
			WHERE `+strings.Join(where, " AND ")+` ORDER BY `+queueOrder+fmt.Sprintf(" LIMIT %d", t.pageSize), args...)
	}, fn)
	if err != nil {
		return false, fmt.Errorf("queue %q: %w", queue, err)
	}
	return more, nil
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
	_, _, err := walk(t.pageSize, nil, func(last *engine.Timer) ([]engine.Timer, error) {
		where, args := timeCond([]string{"true"}, nil, "due", r)
		if last != nil {
			args = append(args, nanos(last.Due), int16(last.Kind), b(last.WorkflowID), b(last.ID))
			n := len(args)
			where = append(where, fmt.Sprintf("(due, kind, length(workflow_id), workflow_id, id) > ($%d, $%d, length($%d::bytea), $%d, $%d)",
				n-3, n-2, n-1, n-1, n))
		}
		return collect(t, scanTimer, "SELECT due, kind, workflow_id, id FROM timers WHERE "+strings.Join(where, " AND ")+
			" ORDER BY "+timerOrder+fmt.Sprintf(" LIMIT %d", t.pageSize), args...)
	}, fn)
	if err != nil {
		return fmt.Errorf("timers: %w", err)
	}
	return nil
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
	type row struct {
		ref deadLetterRef
		a   *durablev1.ActivityRecord
	}
	var from *row
	if after != nil {
		c := newCursorReader(after, cursorDeadLetter)
		ref := deadLetterRef{at: c.i64(), wf: c.s16(), id: c.tail()}
		if !c.done() {
			return nil, &engine.InvalidError{Field: "next_page_token", Reason: "not a dead-letter cursor"}
		}
		from = &row{ref: ref}
	}
	scan := func(r pgx.CollectableRow) (row, error) {
		var wf, id, v []byte
		var x row
		if err := r.Scan(&x.ref.at, &wf, &id, &v); err != nil {
			return x, err
		}
		x.ref.wf, x.ref.id, x.a = string(wf), string(id), new(durablev1.ActivityRecord)
		return x, unmarshal("dead letter", v, x.a)
	}
	last, _, err := walk(t.pageSize, from, func(from *row) ([]row, error) {
		where, args := timeCond([]string{"dead_lettered_at IS NOT NULL"}, nil, "dead_lettered_at", r)
		if from != nil {
			args = append(args, from.ref.at, b(from.ref.wf), b(from.ref.id))
			n := len(args)
			where = append(where, fmt.Sprintf("(dead_lettered_at, length(workflow_id), workflow_id, activity_id) > ($%d, length($%d::bytea), $%d, $%d)",
				n-2, n-1, n-1, n))
		}
		return collect(t, scan, "SELECT dead_lettered_at, workflow_id, activity_id, record FROM activities WHERE "+
			strings.Join(where, " AND ")+" ORDER BY dead_lettered_at, length(workflow_id), workflow_id, activity_id"+
			fmt.Sprintf(" LIMIT %d", t.pageSize), args...)
	}, func(x row) bool { return fn(x.a) })
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	if last == nil {
		return nil, nil
	}
	return last.ref.cursor(), nil
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
	type row struct {
		ref stateRef
		a   *durablev1.ActivityRecord
	}
	var from *row
	if after != nil {
		c := newCursorReader(after, cursorState)
		ref := stateRef{state: durablev1.ActivityState(c.u8()), activityType: c.s16(), wf: c.s16(), id: c.tail()}
		if !c.done() || !slices.Contains(states, int16(ref.state)) || r.ActivityType != "" && ref.activityType != r.ActivityType {
			return nil, &engine.InvalidError{Field: "next_page_token", Reason: "not a page token of this query"}
		}
		from = &row{ref: ref}
	}
	scan := func(r pgx.CollectableRow) (row, error) {
		var state int16
		var typ, wf, id, v []byte
		var x row
		if err := r.Scan(&state, &typ, &wf, &id, &v); err != nil {
			return x, err
		}
		x.ref = stateRef{state: durablev1.ActivityState(state), activityType: string(typ), wf: string(wf), id: string(id)}
		x.a = new(durablev1.ActivityRecord)
		return x, unmarshal("activity", v, x.a)
	}
	last, _, err := walk(t.pageSize, from, func(from *row) ([]row, error) {
		where := []string{"state <> 0", "state = ANY($1)"}
		args := []any{states}
		if r.ActivityType != "" {
			args = append(args, b(r.ActivityType))
			where = append(where, "length(activity_type) = length($2::bytea)", "activity_type = $2")
		}
		if from != nil {
			args = append(args, int16(from.ref.state), b(from.ref.activityType), b(from.ref.wf), b(from.ref.id))
			n := len(args)
			where = append(where, fmt.Sprintf(`(state, length(activity_type), activity_type, length(workflow_id), workflow_id, activity_id) >
				($%d, length($%d::bytea), $%d, length($%d::bytea), $%d, $%d)`, n-3, n-2, n-2, n-1, n-1, n))
		}
		return collect(t, scan, "SELECT state, activity_type, workflow_id, activity_id, record FROM activities WHERE "+
			strings.Join(where, " AND ")+
			" ORDER BY state, length(activity_type), activity_type, length(workflow_id), workflow_id, activity_id"+
			fmt.Sprintf(" LIMIT %d", t.pageSize), args...)
	}, func(x row) bool { return fn(x.a) })
	if err != nil {
		return nil, fmt.Errorf("activities by state: %w", err)
	}
	if last == nil {
		return nil, nil
	}
	return last.ref.cursor(), nil
}

// workflowRow is a workflow in a list, with its key there.
type workflowRow struct {
	id       []byte
	closedAt int64
	w        *durablev1.WorkflowRecord
}

// scanWorkflow reads (workflow_id, record[, closed_at]).
func scanWorkflow(row pgx.CollectableRow) (workflowRow, error) {
	var x workflowRow
	var v []byte
	dest := []any{&x.id, &v}
	if len(row.FieldDescriptions()) == 3 {
		dest = append(dest, &x.closedAt)
	}
	if err := row.Scan(dest...); err != nil {
		return x, err
	}
	x.w = new(durablev1.WorkflowRecord)
	return x, unmarshal("workflow", v, x.w)
}

// RunningWorkflows walks the running workflows in id order.
func (t *tx) RunningWorkflows(fn func(*durablev1.WorkflowRecord) bool) error {
	_, _, err := walk(t.pageSize, nil, func(last *workflowRow) ([]workflowRow, error) {
		if last == nil {
			return collect(t, scanWorkflow, "SELECT workflow_id, record FROM workflows WHERE running ORDER BY workflow_id LIMIT $1", t.pageSize)
		}
		return collect(t, scanWorkflow, "SELECT workflow_id, record FROM workflows WHERE running AND workflow_id > $2 ORDER BY workflow_id LIMIT $1",
			t.pageSize, last.id)
	}, func(x workflowRow) bool { return fn(x.w) })
	if err != nil {
		return fmt.Errorf("running workflows: %w", err)
	}
	return nil
}

// ClosedWorkflows walks the workflows closed at or after since, the newest
// close first.
func (t *tx) ClosedWorkflows(since time.Time, fn func(*durablev1.WorkflowRecord) bool) error {
	_, _, err := walk(t.pageSize, nil, func(last *workflowRow) ([]workflowRow, error) {
		if last == nil {
			return collect(t, scanWorkflow, `SELECT workflow_id, record, closed_at FROM workflows WHERE closed_at IS NOT NULL AND closed_at >= $2
				ORDER BY closed_at DESC, workflow_id DESC LIMIT $1`, t.pageSize, nanos(since))
		}
		return collect(t, scanWorkflow, `SELECT workflow_id, record, closed_at FROM workflows WHERE closed_at IS NOT NULL AND closed_at >= $2
			AND (closed_at, workflow_id) < ($3, $4) ORDER BY closed_at DESC, workflow_id DESC LIMIT $1`, t.pageSize, nanos(since), last.closedAt, last.id)
	}, func(x workflowRow) bool { return fn(x.w) })
	if err != nil {
		return fmt.Errorf("closed workflows: %w", err)
	}
	return nil
}
