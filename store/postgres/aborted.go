package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// When a statement fails, PostgreSQL aborts the whole transaction and
// answers every later statement with "current transaction is aborted"
// (25P02), whatever the first failure was. The engine may go on after an
// error it means to report later (a history append, for one), so the error
// that reaches Update can be that 25P02, which hides a serialization
// failure that running the transaction again would have cured. A
// transaction therefore remembers the first error the server gave it
// (firstFailure), and Update judges the attempt by that one.

// querier is what a transaction asks of pgx.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// firstFailure is a querier that keeps the first error the server
// returned through it.
type firstFailure struct {
	q   querier
	err error
}

// note keeps err if it is the server's and the first; it returns err.
func (f *firstFailure) note(err error) error {
	var pe *pgconn.PgError
	if f.err == nil && errors.As(err, &pe) {
		f.err = err
	}
	return err
}

func (f *firstFailure) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := f.q.Exec(ctx, sql, args...)
	return tag, f.note(err)
}

func (f *firstFailure) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := f.q.Query(ctx, sql, args...)
	if err != nil {
		return rows, f.note(err)
	}
	return &notedRows{Rows: rows, f: f}, nil
}

func (f *firstFailure) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return notedRow{row: f.q.QueryRow(ctx, sql, args...), f: f}
}

func (f *firstFailure) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return notedBatch{BatchResults: f.q.SendBatch(ctx, b), f: f}
}

type notedRows struct {
	pgx.Rows
	f *firstFailure
}

func (r *notedRows) Err() error { return r.f.note(r.Rows.Err()) }

type notedRow struct {
	row pgx.Row
	f   *firstFailure
}

func (r notedRow) Scan(dest ...any) error { return r.f.note(r.row.Scan(dest...)) }

type notedBatch struct {
	pgx.BatchResults
	f *firstFailure
}

func (b notedBatch) Exec() (pgconn.CommandTag, error) {
	tag, err := b.BatchResults.Exec()
	return tag, b.f.note(err)
}

func (b notedBatch) Query() (pgx.Rows, error) {
	rows, err := b.BatchResults.Query()
	if err != nil {
		return rows, b.f.note(err)
	}
	return &notedRows{Rows: rows, f: b.f}, nil
}

func (b notedBatch) QueryRow() pgx.Row { return notedRow{row: b.BatchResults.QueryRow(), f: b.f} }

func (b notedBatch) Close() error { return b.f.note(b.BatchResults.Close()) }
