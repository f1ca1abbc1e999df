package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
)

// SharePollers replaces this node's rows of the pollers table with ps
// (migration 0004), for the other nodes to list (Pollers).
func (t *tx) SharePollers(ps []engine.PollerState) error {
	if t.readOnly {
		return errors.New("share pollers: the transaction is read-only")
	}
	if _, err := t.q.Exec(t.ctx, "DELETE FROM pollers WHERE node = $1", t.s.node); err != nil {
		return fmt.Errorf("share pollers: %w", err)
	}
	if len(ps) == 0 {
		return nil
	}
	queues := make([][]byte, len(ps))
	kinds := make([]int16, len(ps))
	identities := make([][]byte, len(ps))
	parked := make([]bool, len(ps))
	last := make([]int64, len(ps))
	for i, p := range ps {
		queues[i], kinds[i], identities[i], parked[i], last[i] = []byte(p.Queue), int16(p.Kind), []byte(p.Identity), p.Parked, nanos(p.Last)
	}
	_, err := t.q.Exec(t.ctx, `INSERT INTO pollers (node, task_queue, kind, identity, parked, last_poll)
		SELECT $1, p.task_queue, p.kind, p.identity, p.parked, p.last_poll
		FROM unnest($2::bytea[], $3::smallint[], $4::bytea[], $5::boolean[], $6::bigint[]) AS p (task_queue, kind, identity, parked, last_poll)`,
		t.s.node, queues, kinds, identities, parked, last)
	if err != nil {
		return fmt.Errorf("share pollers: %w", err)
	}
	return nil
}

// Pollers returns the pollers that the nodes named shared (SharePollers).
func (t *tx) Pollers(nodes []string) ([]engine.PollerState, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	rows, err := t.q.Query(t.ctx, `SELECT task_queue, kind, identity, parked, last_poll FROM pollers WHERE node = ANY ($1::text[])`, nodes)
	if err != nil {
		return nil, fmt.Errorf("pollers: %w", err)
	}
	ps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (engine.PollerState, error) {
		var queue, identity []byte
		var kind int16
		var last int64
		var p engine.PollerState
		err := row.Scan(&queue, &kind, &identity, &p.Parked, &last)
		p.Queue, p.Kind, p.Identity, p.Last = string(queue), engine.TaskKind(kind), string(identity), fromNanos(last)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("pollers: %w", err)
	}
	return ps, nil
}
