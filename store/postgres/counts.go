package postgres

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// countRef names one activity count: a task queue and a state.
type countRef struct {
	queue string
	state durablev1.ActivityState
}

func countRefOf(a *durablev1.ActivityRecord) countRef {
	return countRef{queue: a.GetInfo().GetTaskQueue(), state: a.GetInfo().GetState()}
}

// moveCount moves one activity from the count from to the count to; a
// zero state is no count.
func (t *tx) moveCount(from, to countRef) {
	if from == to {
		return
	}
	if t.counts == nil {
		t.counts = map[countRef]int64{}
	}
	if from.state != 0 {
		t.counts[from]--
	}
	if to.state != 0 {
		t.counts[to]++
	}
}

// finish ends the transaction in one round trip: the writes that wait, the
// moves of the activity counts, the notifications and the commit. A
// transaction that sent nothing and has nothing to write ends without one.
func (t *tx) finish() error {
	batch := &pgx.Batch{}
	t.queueCounts(batch)
	for _, p := range t.payloads {
		batch.Queue("SELECT pg_notify($1, $2)", noticeChannel, p)
	}
	t.payloads = nil
	if batch.Len() == 0 && !t.p.began && len(t.p.writes) == 0 {
		return nil
	}
	batch.Queue("COMMIT")
	return t.send("commit", batch)
}

// flushCounts writes the moves of the activity counts noted so far.
func (t *tx) flushCounts() error {
	batch := &pgx.Batch{}
	t.queueCounts(batch)
	if batch.Len() == 0 {
		return nil
	}
	return t.send("activity counts", batch)
}

// queueCounts queues the statements that move this node's rows of the
// activity counts. Each node writes rows of its own, so that two nodes
// counting on one queue never write the same row; a row may go negative
// (what one node scheduled another completed) and is deleted at zero.
//
// The rows are also per slot (tx.slot): the transactions one node runs at
// once hold different slots, so that they do not queue behind one
// another's row locks, or abort on each other's updates, either. They are
// written in one order, so that two transactions that do meet on a row
// (only a lease's worth of slots) cannot deadlock on two.
//
// The moves go in two statements however many counts they touch: one
// upsert that adds each move to its row (the moves are summed per row
// first, so that no row is named twice) and one delete of the rows it
// left at zero (a statement cannot delete a row its own upsert wrote).
func (t *tx) queueCounts(batch *pgx.Batch) {
	for _, st := range countStatements(t.counts) {
		batch.Queue(st.sql, append([]any{t.s.node, t.slot}, st.args...)...)
	}
	clear(t.counts)
}

// countStatement is a statement of the activity counts, without its first
// two arguments, the node and the slot.
type countStatement struct {
	sql  string
	args []any
}

const (
	addCountsSQL = `INSERT INTO activity_counts (node, slot, state, task_queue, n)
		SELECT $1, $2, m.state, m.task_queue, m.n FROM unnest($3::smallint[], $4::bytea[], $5::bigint[]) AS m (state, task_queue, n)
		ON CONFLICT (node, slot, state, task_queue) DO UPDATE SET n = activity_counts.n + excluded.n`
	dropZeroCountsSQL = `DELETE FROM activity_counts c USING unnest($3::smallint[], $4::bytea[]) AS m (state, task_queue)
		WHERE c.node = $1 AND c.slot = $2 AND c.state = m.state AND c.task_queue = m.task_queue AND c.n = 0`
)

// countStatements returns the statements that add moves, summed per count,
// to one node's and slot's rows: none when nothing moved.
func countStatements(moves map[countRef]int64) []countStatement {
	refs := slices.SortedFunc(maps.Keys(moves), func(x, y countRef) int {
		return cmp.Or(cmp.Compare(x.state, y.state), cmp.Compare(x.queue, y.queue))
	})
	var states []int16
	var queues [][]byte
	var deltas []int64
	for _, r := range refs {
		if moves[r] == 0 {
			continue
		}
		states, queues, deltas = append(states, int16(r.state)), append(queues, b(r.queue)), append(deltas, moves[r])
	}
	if len(states) == 0 {
		return nil
	}
	return []countStatement{
		{sql: addCountsSQL, args: []any{states, queues, deltas}},
		{sql: dropZeroCountsSQL, args: []any{states, queues}},
	}
}

// ActivityCounts sums every node's rows.
func (t *tx) ActivityCounts(fn func(taskQueue string, state durablev1.ActivityState, n int64) bool) (bool, error) {
	if err := t.flushCounts(); err != nil {
		return false, err
	}
	rows, err := t.q.Query(t.ctx, `SELECT state, task_queue, sum(n)::bigint FROM activity_counts
		GROUP BY state, task_queue HAVING sum(n) <> 0 ORDER BY state, task_queue`)
	if err != nil {
		return false, fmt.Errorf("activity counts: %w", err)
	}
	type count struct {
		state int16
		queue []byte
		n     int64
	}
	cs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (count, error) {
		var c count
		return c, row.Scan(&c.state, &c.queue, &c.n)
	})
	if err != nil {
		return false, fmt.Errorf("activity counts: %w", err)
	}
	for _, c := range cs {
		if !fn(string(c.queue), durablev1.ActivityState(c.state), c.n) {
			break
		}
	}
	return true, nil
}
