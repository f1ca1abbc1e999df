package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func (t *tx) PutFinishedActivity(f *durablev1.FinishedActivity) error {
	in := f.GetActivity()
	wf, id := in.GetWorkflowId(), in.GetActivityId()
	if err := firstErr(checkPart("workflow_id", wf), checkPart("activity_id", id)); err != nil {
		return err
	}
	v, err := marshal(f)
	if err != nil {
		return err
	}
	_, err = t.q.Exec(t.ctx, `INSERT INTO finished_activities (workflow_id, activity_id, finished_at, record) VALUES ($1, $2, $3, $4)
		ON CONFLICT (workflow_id, activity_id) DO UPDATE SET finished_at = excluded.finished_at, record = excluded.record`,
		b(wf), b(id), nanos(f.GetFinishedTime().AsTime()), v)
	if err != nil {
		return fmt.Errorf("put finished activity %s/%s: %w", wf, id, err)
	}
	return nil
}

func (t *tx) FinishedActivities(workflowID string) ([]*durablev1.FinishedActivity, error) {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return nil, err
	}
	return records(t, func() *durablev1.FinishedActivity { return new(durablev1.FinishedActivity) },
		fmt.Sprintf("finished activities of workflow %q", workflowID),
		"SELECT record FROM finished_activities WHERE workflow_id = $1 ORDER BY activity_id", b(workflowID))
}

func (t *tx) DeleteFinishedBefore(before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	tag, err := t.q.Exec(t.ctx, `DELETE FROM finished_activities WHERE (workflow_id, activity_id) IN (
		SELECT workflow_id, activity_id FROM finished_activities WHERE finished_at < $1
		ORDER BY finished_at, length(workflow_id), workflow_id, activity_id LIMIT $2)`, nanos(before), limit)
	if err != nil {
		return 0, fmt.Errorf("finished activities: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

func newLatency() *durablev1.LatencyRecord { return new(durablev1.LatencyRecord) }

func (t *tx) GetLatency(activityType string) (*durablev1.LatencyRecord, error) {
	if err := checkPart("activity_type", activityType); err != nil {
		return nil, err
	}
	l := new(durablev1.LatencyRecord)
	if err := t.get(l, fmt.Sprintf("latency of %q", activityType), "SELECT record FROM latency WHERE activity_type = $1", b(activityType)); err != nil {
		return nil, err
	}
	return l, nil
}

func (t *tx) PutLatency(l *durablev1.LatencyRecord) error {
	if err := checkPart("activity_type", l.GetActivityType()); err != nil {
		return err
	}
	v, err := marshal(l)
	if err != nil {
		return err
	}
	_, err = t.q.Exec(t.ctx, `INSERT INTO latency (activity_type, record) VALUES ($1, $2)
		ON CONFLICT (activity_type) DO UPDATE SET record = excluded.record`, b(l.GetActivityType()), v)
	if err != nil {
		return fmt.Errorf("put latency of %q: %w", l.GetActivityType(), err)
	}
	return nil
}

func (t *tx) ListLatency() ([]*durablev1.LatencyRecord, error) {
	return records(t, newLatency, "list latency", "SELECT record FROM latency ORDER BY activity_type")
}

func (t *tx) GetLatencyHour(activityType string, hour time.Time) (*durablev1.LatencyRecord, error) {
	if err := checkPart("activity_type", activityType); err != nil {
		return nil, err
	}
	l := new(durablev1.LatencyRecord)
	err := t.get(l, fmt.Sprintf("latency of %q in the hour of %s", activityType, hour.UTC().Format(time.RFC3339)),
		"SELECT record FROM latency_hours WHERE length(activity_type) = length($1::bytea) AND activity_type = $1 AND hour = $2",
		b(activityType), nanos(hour))
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (t *tx) PutLatencyHour(l *durablev1.LatencyRecord) error {
	if err := checkPart("activity_type", l.GetActivityType()); err != nil {
		return err
	}
	if l.GetHour() == nil {
		return &engine.InvalidError{Field: "hour", Reason: "an hourly latency record needs its hour"}
	}
	v, err := marshal(l)
	if err != nil {
		return err
	}
	hour := l.GetHour().AsTime()
	_, err = t.q.Exec(t.ctx, `INSERT INTO latency_hours (activity_type, hour, record) VALUES ($1, $2, $3)
		ON CONFLICT (length(activity_type), activity_type, hour) DO UPDATE SET record = excluded.record`,
		b(l.GetActivityType()), nanos(hour), v)
	if err != nil {
		return fmt.Errorf("put latency of %q in the hour of %s: %w", l.GetActivityType(), hour.UTC().Format(time.RFC3339), err)
	}
	return nil
}

const latencyHourOrder = "length(activity_type), activity_type, hour"

func (t *tx) LatencyHours(since time.Time, fn func(*durablev1.LatencyRecord) bool) error {
	var lastType []byte
	var lastHour int64
	for first := true; ; first = false {
		sql := "SELECT activity_type, hour, record FROM latency_hours WHERE hour >= $2 ORDER BY " + latencyHourOrder + " LIMIT $1"
		args := []any{pageSize, nanos(since)}
		if !first {
			sql = `SELECT activity_type, hour, record FROM latency_hours WHERE hour >= $2
				AND (length(activity_type), activity_type, hour) > (length($3::bytea), $3, $4) ORDER BY ` + latencyHourOrder + " LIMIT $1"
			args = append(args, lastType, lastHour)
		}
		page, err := t.latencyPage(sql, args, &lastType, &lastHour)
		if err != nil {
			return err
		}
		for _, l := range page {
			if !fn(l) {
				return nil
			}
		}
		if len(page) < pageSize {
			return nil
		}
	}
}

func (t *tx) latencyPage(sql string, args []any, lastType *[]byte, lastHour *int64) ([]*durablev1.LatencyRecord, error) {
	rows, err := t.q.Query(t.ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("latency hours: %w", err)
	}
	var out []*durablev1.LatencyRecord
	var v []byte
	_, err = pgx.ForEachRow(rows, []any{lastType, lastHour, &v}, func() error {
		l := new(durablev1.LatencyRecord)
		out = append(out, l)
		return unmarshal("latency hour", v, l)
	})
	if err != nil {
		return nil, fmt.Errorf("latency hours: %w", err)
	}
	return out, nil
}

func (t *tx) LatencyHoursBefore(before time.Time, limit int) ([]*durablev1.LatencyRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	var typ []byte
	var hour int64
	return t.latencyPage("SELECT activity_type, hour, record FROM latency_hours WHERE hour < $1 ORDER BY "+latencyHourOrder+" LIMIT $2",
		[]any{nanos(before), limit}, &typ, &hour)
}

func (t *tx) DeleteLatencyHour(activityType string, hour time.Time) error {
	if err := checkPart("activity_type", activityType); err != nil {
		return err
	}
	_, err := t.q.Exec(t.ctx, "DELETE FROM latency_hours WHERE length(activity_type) = length($1::bytea) AND activity_type = $1 AND hour = $2",
		b(activityType), nanos(hour))
	if err != nil {
		return fmt.Errorf("delete latency of %q in the hour of %s: %w", activityType, hour.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// queueName names a task queue in messages; "" is every queue.
func queueName(q string) string {
	if q == "" {
		return "every queue"
	}
	return fmt.Sprintf("queue %q", q)
}

func (t *tx) GetPolicyOverride(activityType, taskQueue string) (*durablev1.PolicyOverride, error) {
	if err := firstErr(checkPart("activity_type", activityType), checkPart("task_queue", taskQueue)); err != nil {
		return nil, err
	}
	o := new(durablev1.PolicyOverride)
	err := t.get(o, fmt.Sprintf("policy override of %q on %s", activityType, queueName(taskQueue)),
		`SELECT record FROM policy_overrides WHERE length(activity_type) = length($1::bytea) AND activity_type = $1 AND task_queue = $2`,
		b(activityType), b(taskQueue))
	if err != nil {
		return nil, err
	}
	return o, nil
}

func (t *tx) PutPolicyOverride(o *durablev1.PolicyOverride) error {
	typ, queue := o.GetActivityType(), o.GetTaskQueue()
	if err := firstErr(checkPart("activity_type", typ), checkPart("task_queue", queue)); err != nil {
		return err
	}
	v, err := marshal(o)
	if err != nil {
		return err
	}
	_, err = t.q.Exec(t.ctx, `INSERT INTO policy_overrides (activity_type, task_queue, record) VALUES ($1, $2, $3)
		ON CONFLICT (length(activity_type), activity_type, task_queue) DO UPDATE SET record = excluded.record`, b(typ), b(queue), v)
	if err != nil {
		return fmt.Errorf("put policy override of %q on %s: %w", typ, queueName(queue), err)
	}
	return nil
}

func (t *tx) DeletePolicyOverride(activityType, taskQueue string) error {
	if err := firstErr(checkPart("activity_type", activityType), checkPart("task_queue", taskQueue)); err != nil {
		return err
	}
	_, err := t.q.Exec(t.ctx, `DELETE FROM policy_overrides WHERE length(activity_type) = length($1::bytea) AND activity_type = $1 AND task_queue = $2`,
		b(activityType), b(taskQueue))
	if err != nil {
		return fmt.Errorf("delete policy override of %q on %s: %w", activityType, queueName(taskQueue), err)
	}
	return nil
}

func (t *tx) PolicyOverrides() ([]*durablev1.PolicyOverride, error) {
	return records(t, func() *durablev1.PolicyOverride { return new(durablev1.PolicyOverride) }, "policy overrides",
		"SELECT record FROM policy_overrides ORDER BY length(activity_type), activity_type, task_queue")
}

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
	var from *[2]int64
	if after != nil {
		c := newCursorReader(after, cursorAudit)
		ref := [2]int64{c.i64(), c.i64()}
		if !c.done() {
			return nil, &engine.InvalidError{Field: "next_page_token", Reason: "is not a page token of the audit log"}
		}
		from = &ref
	}
	var last []byte
	for {
		sql := "SELECT at, id, record FROM audit ORDER BY at DESC, id DESC LIMIT $1"
		args := []any{pageSize}
		if from != nil {
			sql = "SELECT at, id, record FROM audit WHERE (at, id) < ($2, $3) ORDER BY at DESC, id DESC LIMIT $1"
			args = append(args, from[0], from[1])
		}
		rows, err := t.q.Query(t.ctx, sql, args...)
		if err != nil {
			return nil, fmt.Errorf("audit records: %w", err)
		}
		type row struct {
			ref [2]int64
			r   *durablev1.AuditRecord
		}
		page, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
			var x row
			var v []byte
			if err := cr.Scan(&x.ref[0], &x.ref[1], &v); err != nil {
				return x, err
			}
			x.r = new(durablev1.AuditRecord)
			return x, unmarshal("audit record", v, x.r)
		})
		if err != nil {
			return nil, fmt.Errorf("audit records: %w", err)
		}
		for _, x := range page {
			last = cursorWriter{cursorAudit}.i64(x.ref[0]).i64(x.ref[1])
			if !fn(x.r) {
				return last, nil
			}
		}
		if len(page) < pageSize {
			return last, nil
		}
		from = &page[len(page)-1].ref
	}
}

func (t *tx) DeleteAuditBefore(before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	tag, err := t.q.Exec(t.ctx, `DELETE FROM audit WHERE (at, id) IN (
		SELECT at, id FROM audit WHERE at < $1 ORDER BY at, id LIMIT $2)`, nanos(before), limit)
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
	var from *int64
	if after != nil {
		c := newCursorReader(after, cursorOperation)
		seq := c.i64()
		if !c.done() {
			return nil, &engine.InvalidError{Field: "next_page_token", Reason: "is not a page token of the operations list"}
		}
		from = &seq
	}
	var last []byte
	for {
		sql := "SELECT seq, record FROM operations ORDER BY seq DESC LIMIT $1"
		args := []any{pageSize}
		if from != nil {
			sql = "SELECT seq, record FROM operations WHERE seq < $2 ORDER BY seq DESC LIMIT $1"
			args = append(args, *from)
		}
		rows, err := t.q.Query(t.ctx, sql, args...)
		if err != nil {
			return nil, fmt.Errorf("operations: %w", err)
		}
		var seqs []int64
		var page []*durablev1.OperationRecord
		var seq int64
		var v []byte
		_, err = pgx.ForEachRow(rows, []any{&seq, &v}, func() error {
			r := new(durablev1.OperationRecord)
			seqs, page = append(seqs, seq), append(page, r)
			return unmarshal("operation", v, r)
		})
		if err != nil {
			return nil, fmt.Errorf("operations: %w", err)
		}
		for i, r := range page {
			last = cursorWriter{cursorOperation}.i64(seqs[i])
			if !fn(r) {
				return last, nil
			}
		}
		if len(page) < pageSize {
			return last, nil
		}
		from = &seqs[len(seqs)-1]
	}
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
