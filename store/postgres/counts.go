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
func (t *tx) queueCounts(batch *pgx.Batch) {
	refs := slices.SortedFunc(maps.Keys(t.counts), func(x, y countRef) int {
		return cmp.Or(cmp.Compare(x.state, y.state), cmp.Compare(x.queue, y.queue))
	})
	for _, r := range refs {
		delta := t.counts[r]
		if delta == 0 {
			continue
		}
		batch.Queue(`INSERT INTO activity_counts (node, slot, state, task_queue, n) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (node, slot, state, task_queue) DO UPDATE SET n = activity_counts.n + excluded.n`,
			t.s.node, t.slot, int16(r.state), b(r.queue), delta)
		batch.Queue("DELETE FROM activity_counts WHERE node = $1 AND slot = $2 AND state = $3 AND task_queue = $4 AND n = 0",
			t.s.node, t.slot, int16(r.state), b(r.queue))
	}
	clear(t.counts)
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
