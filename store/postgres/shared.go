package postgres

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
)

// The claims lock the rows they return (FOR UPDATE) and pass over rows
// another transaction has locked (SKIP LOCKED), so that nodes claiming from
// one queue at once are handed different entries instead of waiting for
// one another. The queue_order and timers_order indexes give the order, so
// a claim reads only the rows it returns and those it skips: the limit
// applies after the locking.

// A claim also reads the record of each entry it claims, the activity or
// the workflow, which the transaction keeps (cache.go): the lease that
// follows reads each one, and finds it in memory, so a lease costs a round
// trip for the claim and one to end the transaction, however many tasks it
// hands out. The records are read in the claim's snapshot, the one the
// whole transaction reads; the rows are not locked (the transitions are
// fenced by the records they write).

// A claim that finds nothing also reads, in the same statement, when the
// queue's earliest entry due later is: the poll sets its alarm for it
// without another round trip.

// The statements of the claims and of the next due times (the tests read
// their plans).
const (
	claimQueuedSQL = `SELECT kind, task_queue, due, seq, workflow_id, activity_id FROM queue
		WHERE kind = $1 AND length(task_queue) = length($2::bytea) AND task_queue = $2 AND due <= $3
		ORDER BY ` + queueOrder + ` LIMIT $4 FOR UPDATE SKIP LOCKED`
	// claimTailSQL adds a row when nothing was claimed: kind NULL, due
	// the queue's next due time after now (NULL: none).
	claimTailSQL = `
		UNION ALL
		SELECT NULL, NULL,
			(SELECT due FROM queue WHERE kind = $1 AND length(task_queue) = length($2::bytea) AND task_queue = $2 AND due > $3
				ORDER BY due LIMIT 1),
			NULL, NULL, NULL, NULL
		WHERE NOT EXISTS (SELECT FROM c)`
	claimActivityTasksSQL = `WITH c AS (` + claimQueuedSQL + `)
		SELECT c.kind, c.task_queue, c.due, c.seq, c.workflow_id, c.activity_id, a.record FROM c
		LEFT JOIN activities a ON a.workflow_id = c.workflow_id AND a.activity_id = c.activity_id` + claimTailSQL
	claimWorkflowTasksSQL = `WITH c AS (` + claimQueuedSQL + `)
		SELECT c.kind, c.task_queue, c.due, c.seq, c.workflow_id, c.activity_id, w.record FROM c
		LEFT JOIN workflows w ON w.workflow_id = c.workflow_id` + claimTailSQL
	claimTimersSQL = "SELECT due, kind, workflow_id, id FROM timers WHERE due <= $1 ORDER BY " + timerOrder + " LIMIT $2 FOR UPDATE SKIP LOCKED"
	nextTimerSQL   = "SELECT due FROM timers WHERE due > $1 ORDER BY due LIMIT 1"
)

func (t *tx) ClaimQueued(kind engine.TaskKind, queue string, now time.Time, limit int) (engine.Claimed, error) {
	if err := checkPart("task_queue", queue); err != nil {
		return engine.Claimed{}, err
	}
	if limit <= 0 {
		return engine.Claimed{}, nil
	}
	sql, table := claimActivityTasksSQL, cacheActivity
	if kind == engine.WorkflowTask {
		sql, table = claimWorkflowTasksSQL, cacheWorkflow
	}
	type claimed struct {
		e      engine.QueueEntry
		record []byte
		tail   bool
		next   *int64
	}
	rows, err := collect(t, func(row pgx.CollectableRow) (claimed, error) {
		var kind *int16
		var seq *int64
		var queue, wf, act []byte
		var due *int64
		var c claimed
		if err := row.Scan(&kind, &queue, &due, &seq, &wf, &act, &c.record); err != nil {
			return c, err
		}
		if kind == nil {
			c.tail, c.next = true, due
			return c, nil
		}
		c.e.Kind, c.e.Queue, c.e.Due, c.e.Seq, c.e.WorkflowID, c.e.ActivityID = engine.TaskKind(*kind), string(queue), fromNanos(*due), *seq, string(wf), string(act)
		return c, nil
	}, sql, int16(kind), b(queue), nanos(now), limit)
	if err != nil {
		return engine.Claimed{}, fmt.Errorf("claim from queue %q: %w", queue, err)
	}
	var out engine.Claimed
	for _, c := range rows {
		if c.tail {
			if c.next != nil {
				out.Next = fromNanos(*c.next)
			}
			continue
		}
		out.Entries = append(out.Entries, c.e)
		k := recordKey{table: table, wf: c.e.WorkflowID}
		if table == cacheActivity {
			k.id = c.e.ActivityID
		}
		if _, known := t.cache[k]; !known {
			t.keep(k, cachedRecord{v: c.record, ok: c.record != nil})
		}
	}
	// The join keeps no order: the entries go out in the queue's.
	slices.SortFunc(out.Entries, func(x, y engine.QueueEntry) int {
		return cmp.Or(x.Due.Compare(y.Due), cmp.Compare(x.Seq, y.Seq), cmp.Compare(len(x.WorkflowID), len(y.WorkflowID)),
			cmp.Compare(x.WorkflowID, y.WorkflowID), cmp.Compare(x.ActivityID, y.ActivityID))
	})
	return out, nil
}

func (t *tx) ClaimTimers(now time.Time, limit int) ([]engine.Timer, error) {
	if limit <= 0 {
		return nil, nil
	}
	ts, err := collect(t, scanTimer, claimTimersSQL, nanos(now), limit)
	if err != nil {
		return nil, fmt.Errorf("claim timers: %w", err)
	}
	return ts, nil
}

func (t *tx) NextTimer(now time.Time) (time.Time, bool, error) {
	return t.next("next timer", nextTimerSQL, nanos(now))
}

// next reads one due time; no row is ok false.
func (t *tx) next(what, sql string, args ...any) (time.Time, bool, error) {
	var due int64
	err := t.q.QueryRow(t.ctx, sql, args...).Scan(&due)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("%s: %w", what, err)
	}
	return fromNanos(due), true, nil
}

// ReserveIDs takes n ids from the database's sequence (reserve_ids in
// migration 0003), outside the transaction: a transaction run again, or
// rolled back, leaves them taken.
func (t *tx) ReserveIDs(n int64) (int64, error) {
	if n < 1 {
		return 0, &engine.InvalidError{Field: "n", Reason: fmt.Sprintf("must be at least 1, got %d", n)}
	}
	if t.readOnly {
		return 0, errors.New("reserve ids: the transaction is read-only")
	}
	var first int64
	if err := t.q.QueryRow(t.ctx, "SELECT reserve_ids($1)", n).Scan(&first); err != nil {
		return 0, fmt.Errorf("reserve %d ids: %w", n, err)
	}
	return first, nil
}

// Notify encodes n at once and sends it with pg_notify in the round trip
// that ends the transaction (finish): PostgreSQL delivers it at commit and
// drops it on a rollback. Each attempt of Update has a tx of its own, so
// what an attempt that was rolled back notified is never sent.
func (t *tx) Notify(n engine.Notice) error {
	if t.readOnly {
		return errors.New("notify: the transaction is read-only")
	}
	// The operations and audit records go in a notice of their own (see
	// noticeVersion).
	later := engine.Notice{OperationSeqs: n.OperationSeqs, Audits: n.Audits}
	n.OperationSeqs, n.Audits = nil, nil
	t.notices++
	t.payloads = append(t.payloads, encodeNotice(n, t.s.node, t.s.incarnation, t.notices)...)
	if len(later.OperationSeqs) > 0 || len(later.Audits) > 0 {
		t.notices++
		t.payloads = append(t.payloads, encodeNotice(later, t.s.node, t.s.incarnation, t.notices)...)
	}
	return nil
}
