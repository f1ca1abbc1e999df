package postgres

import (
	"fmt"

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

// flushCounts writes the moves of the activity counts noted so far.
func (t *tx) flushCounts() error {
	batch := &pgx.Batch{}
	for r, delta := range t.counts {
		if delta == 0 {
			continue
		}
		batch.Queue(`INSERT INTO activity_counts (state, task_queue, n) VALUES ($1, $2, $3)
			ON CONFLICT (state, task_queue) DO UPDATE SET n = activity_counts.n + excluded.n`, int16(r.state), b(r.queue), delta)
		batch.Queue("DELETE FROM activity_counts WHERE state = $1 AND task_queue = $2 AND n <= 0", int16(r.state), b(r.queue))
	}
	clear(t.counts)
	if batch.Len() == 0 {
		return nil
	}
	return t.send("activity counts", batch)
}

func (t *tx) ActivityCounts(fn func(taskQueue string, state durablev1.ActivityState, n int64) bool) (bool, error) {
	if err := t.flushCounts(); err != nil {
		return false, err
	}
	rows, err := t.q.Query(t.ctx, "SELECT state, task_queue, n FROM activity_counts ORDER BY state, task_queue")
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
