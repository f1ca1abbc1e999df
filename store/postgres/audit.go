package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func (t *tx) PutAudit(r *durablev1.AuditRecord) error {
	v, err := marshal(r)
	if err != nil {
		return err
	}
	_, err = t.q.Exec(t.ctx, `INSERT INTO audit (at, id, record) VALUES ($1, $2, $3)
		ON CONFLICT (at, id) DO UPDATE SET record = excluded.record`, nanos(r.GetTime().AsTime()), r.GetId(), v)
	if err != nil {
		return fmt.Errorf("put audit record %d: %w", r.GetId(), err)
	}
	return nil
}

func (t *tx) AuditRecords(after []byte, fn func(*durablev1.AuditRecord) bool) ([]byte, error) {
	type row struct {
		at, id int64
		r      *durablev1.AuditRecord
	}
	var from *row
	if after != nil {
		c := newCursorReader(after, cursorAudit)
		ref := row{at: c.i64(), id: c.i64()}
		if !c.done() {
			return nil, &engine.InvalidError{Field: "next_page_token", Reason: "is not a page token of the audit log"}
		}
		from = &ref
	}
	scan := func(cr pgx.CollectableRow) (row, error) {
		var x row
		var v []byte
		if err := cr.Scan(&x.at, &x.id, &v); err != nil {
			return x, err
		}
		x.r = new(durablev1.AuditRecord)
		return x, unmarshal("audit record", v, x.r)
	}
	last, _, err := walk(t.pageSize, from, func(from *row) ([]row, error) {
		if from == nil {
			return collect(t, scan, "SELECT at, id, record FROM audit ORDER BY at DESC, id DESC LIMIT $1", t.pageSize)
		}
		return collect(t, scan, "SELECT at, id, record FROM audit WHERE (at, id) < ($2, $3) ORDER BY at DESC, id DESC LIMIT $1",
			t.pageSize, from.at, from.id)
	}, func(x row) bool { return fn(x.r) })
	if err != nil {
		return nil, fmt.Errorf("audit records: %w", err)
	}
	if last == nil {
		return nil, nil
	}
	return cursorWriter{cursorAudit}.i64(last.at).i64(last.id), nil
}

func (t *tx) DeleteAuditBefore(before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	// The rows are found by their place (ctid), one probe each: joined by
	// their key to rows whose number the plan cannot know (a LIMIT of a
	// parameter), the table would be read whole (planCacheMode).
	tag, err := t.q.Exec(t.ctx, `DELETE FROM audit WHERE ctid = ANY (ARRAY (
		SELECT ctid FROM audit WHERE at < $1 ORDER BY at, id LIMIT $2))`, nanos(before), limit)
	if err != nil {
		return 0, fmt.Errorf("delete audit records: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func (t *tx) GetAudit(at time.Time, id int64) (*durablev1.AuditRecord, error) {
	r := new(durablev1.AuditRecord)
	if err := t.get(r, fmt.Sprintf("audit record %d", id), "SELECT record FROM audit WHERE at = $1 AND id = $2", nanos(at), id); err != nil {
		return nil, err
	}
	return r, nil
}

func (t *tx) GetOperation(seq int64) (*durablev1.OperationRecord, error) {
	r := new(durablev1.OperationRecord)
	if err := t.get(r, fmt.Sprintf("operation %d", seq), "SELECT record FROM operations WHERE seq = $1", seq); err != nil {
		return nil, err
	}
	return r, nil
}

func (t *tx) PutOperation(r *durablev1.OperationRecord) error {
	v, err := marshal(r)
	if err != nil {
		return err
	}
	_, err = t.q.Exec(t.ctx, `INSERT INTO operations (seq, record) VALUES ($1, $2)
		ON CONFLICT (seq) DO UPDATE SET record = excluded.record`, r.GetSeq(), v)
	if err != nil {
		return fmt.Errorf("put operation %d: %w", r.GetSeq(), err)
	}
	return nil
}

func (t *tx) DeleteOperation(seq int64) error {
	if _, err := t.q.Exec(t.ctx, "DELETE FROM operations WHERE seq = $1", seq); err != nil {
		return fmt.Errorf("delete operation %d: %w", seq, err)
	}
	return nil
}

func (t *tx) Operations(after []byte, fn func(*durablev1.OperationRecord) bool) ([]byte, error) {
	type row struct {
		seq int64
		r   *durablev1.OperationRecord
	}
	var from *row
	if after != nil {
		c := newCursorReader(after, cursorOperation)
		ref := row{seq: c.i64()}
		if !c.done() {
			return nil, &engine.InvalidError{Field: "next_page_token", Reason: "is not a page token of the operations list"}
		}
		from = &ref
	}
	scan := func(cr pgx.CollectableRow) (row, error) {
		var x row
		var v []byte
		if err := cr.Scan(&x.seq, &v); err != nil {
			return x, err
		}
		x.r = new(durablev1.OperationRecord)
		return x, unmarshal("operation", v, x.r)
	}
	last, _, err := walk(t.pageSize, from, func(from *row) ([]row, error) {
		if from == nil {
			return collect(t, scan, "SELECT seq, record FROM operations ORDER BY seq DESC LIMIT $1", t.pageSize)
		}
		return collect(t, scan, "SELECT seq, record FROM operations WHERE seq < $2 ORDER BY seq DESC LIMIT $1", t.pageSize, from.seq)
	}, func(x row) bool { return fn(x.r) })
	if err != nil {
		return nil, fmt.Errorf("operations: %w", err)
	}
	if last == nil {
		return nil, nil
	}
	return cursorWriter{cursorOperation}.i64(last.seq), nil
}

func (t *tx) PutOperationItems(seq, from int64, refs []*durablev1.ActivityRef) error {
	batch := &pgx.Batch{}
	for i, ref := range refs {
		v, err := marshal(ref)
		if err != nil {
			return err
		}
		batch.Queue(`INSERT INTO operation_items (seq, idx, ref) VALUES ($1, $2, $3)
			ON CONFLICT (seq, idx) DO UPDATE SET ref = excluded.ref`, seq, from+int64(i), v)
	}
	return t.send(fmt.Sprintf("put items of operation %d", seq), batch)
}

func (t *tx) OperationItems(seq, from int64, limit int) ([]*durablev1.ActivityRef, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := t.q.Query(t.ctx, "SELECT idx, ref FROM operation_items WHERE seq = $1 AND idx >= $2 ORDER BY idx LIMIT $3", seq, from, limit)
	if err != nil {
		return nil, fmt.Errorf("work list of operation %d: %w", seq, err)
	}
	var out []*durablev1.ActivityRef
	var idx int64
	var v []byte
	_, err = pgx.ForEachRow(rows, []any{&idx, &v}, func() error {
		// The work list is written whole when the operation starts, so a
		// gap means the store lost a row.
		if want := from + int64(len(out)); idx != want {
			return fmt.Errorf("item %d missing: %w", want, errCorrupt)
		}
		ref := new(durablev1.ActivityRef)
		out = append(out, ref)
		return unmarshal("work item", v, ref)
	})
	if err != nil {
		return nil, fmt.Errorf("work list of operation %d: %w", seq, err)
	}
	return out, nil
}

func (t *tx) DeleteOperationItems(seq int64, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	tag, err := t.q.Exec(t.ctx, `DELETE FROM operation_items WHERE seq = $1 AND idx IN (
		SELECT idx FROM operation_items WHERE seq = $1 ORDER BY idx LIMIT $2)`, seq, limit)
	if err != nil {
		return 0, fmt.Errorf("delete items of operation %d: %w", seq, err)
	}
	return int(tag.RowsAffected()), nil
}
