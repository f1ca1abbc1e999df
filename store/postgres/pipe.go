package postgres

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A writing transaction does not wait for its writes: each one is queued
// (pipe.later) and goes to the database with the transaction's next
// statement, in the same round trip, or with the statements that end the
// transaction (finish), the writes of each table merged into one statement
// (merge.go). So a transaction costs a round trip per read that
// its cache (cache.go) cannot answer, one to end it, and its begin and
// commit; the writes of a batch of transitions travel together.
//
// What a write returns at once is only what the store checks itself (ids
// too long, records too large). A statement the database refuses fails the
// statement it travels with, and with it the transaction, which PostgreSQL
// has aborted in any case: firstFailure keeps the refusal, and Update judges
// the attempt by it (a serialization failure still runs the transaction
// again). The reads of a transaction see its earlier writes, since every
// queued write reaches the database before the next statement runs.

// The transaction's begin waits the same way, for its first statement, and
// its commit goes with the writes that end it (tx.finish): a transaction
// that reads nothing its cache cannot answer costs one round trip.

// pipe is the querier of a transaction: it sends what waits with each
// statement and counts the round trips.
type pipe struct {
	q      querier
	begin  string // the statement that begins the transaction
	began  bool   // begin has been sent
	writes []queuedWrite
	trips  *atomic.Int64
	stmts  *atomic.Int64 // statements sent
}

var _ querier = (*pipe)(nil)

// later queues writes to go with the next round trip, merged
// (merge.go).
func (p *pipe) later(ws []queuedWrite) {
	p.writes = append(p.writes, ws...)
}

// waiting reports whether anything waits to be sent, the begin included.
func (p *pipe) waiting() bool { return !p.began || len(p.writes) > 0 }

// take returns what waits, to be sent, and forgets it.
func (p *pipe) take() *pgx.Batch {
	b := &pgx.Batch{}
	if !p.began {
		p.began = true
		b.Queue(p.begin).Exec(func(pgconn.CommandTag) error { return nil })
	}
	queueMerged(b, p.writes)
	p.writes = nil
	p.stmts.Add(int64(b.Len()))
	return b
}

// trip counts a round trip that sends n statements besides those take
// returns.
func (p *pipe) trip(n int) {
	p.trips.Add(1)
	p.stmts.Add(int64(n))
}

func (p *pipe) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.trip(1)
	if !p.waiting() {
		return p.q.Exec(ctx, sql, args...)
	}
	b := p.take()
	var tag pgconn.CommandTag
	b.Queue(sql, args...).Exec(func(ct pgconn.CommandTag) error {
		tag = ct
		return nil
	})
	return tag, p.q.SendBatch(ctx, b).Close()
}

func (p *pipe) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	p.trip(1)
	if !p.waiting() {
		return p.q.Query(ctx, sql, args...)
	}
	b := p.take()
	n := b.Len()
	b.Queue(sql, args...)
	br := p.q.SendBatch(ctx, b)
	for _, qq := range b.QueuedQueries[:n] {
		if err := qq.Fn(br); err != nil {
			br.Close()
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (p *pipe) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &pipedRow{p: p, ctx: ctx, sql: sql, args: args}
}

// SendBatch sends what waits, then b.
func (p *pipe) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	p.trip(b.Len())
	if !p.waiting() {
		return p.q.SendBatch(ctx, b)
	}
	all := p.take()
	all.QueuedQueries = append(all.QueuedQueries, b.QueuedQueries...)
	return p.q.SendBatch(ctx, all)
}

// pipedRow is a row of QueryRow, read when it is scanned.
type pipedRow struct {
	p    *pipe
	ctx  context.Context
	sql  string
	args []any
}

func (r *pipedRow) Scan(dest ...any) error {
	p := r.p
	p.trip(1)
	if !p.waiting() {
		return p.q.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...)
	}
	b := p.take()
	// No row is an answer, not a failure of the batch: pgx forgets the
	// prepared statements of a batch that failed.
	none := false
	b.Queue(r.sql, r.args...).QueryRow(func(row pgx.Row) error {
		err := row.Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			none = true
			return nil
		}
		return err
	})
	if err := p.q.SendBatch(r.ctx, b).Close(); err != nil {
		return err
	}
	if none {
		return pgx.ErrNoRows
	}
	return nil
}

// batchRows are the rows of the last statement of a batch; closing them
// closes the batch.
type batchRows struct {
	pgx.Rows
	br pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	r.br.Close()
}
