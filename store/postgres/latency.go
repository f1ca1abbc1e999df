package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func newLatency() *durablev1.LatencyRecord { return new(durablev1.LatencyRecord) }

func (t *tx) GetLatency(activityType string) (*durablev1.LatencyRecord, error) {
	if err := checkPart("activity_type", activityType); err != nil {
		return nil, err
	}
	l := new(durablev1.LatencyRecord)
	_, err := t.cached(recordKey{table: cacheLatency, wf: activityType}, l, fmt.Sprintf("latency of %q", activityType),
		"SELECT record FROM latency WHERE activity_type = $1", b(activityType))
	if err != nil {
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
	err = t.writeOne(fmt.Sprintf("put latency of %q", l.GetActivityType()), latencyTable, b(l.GetActivityType()), v)
	if err != nil {
		return err
	}
	t.keep(recordKey{table: cacheLatency, wf: l.GetActivityType()}, cachedRecord{v: v, ok: true})
	return nil
}

func (t *tx) ListLatency() ([]*durablev1.LatencyRecord, error) {
	return records(t, newLatency, "list latency", "SELECT record FROM latency ORDER BY activity_type")
}

// An hour of latency statistics is kept as one part per node (the attempts
// counted through it), and a read merges the parts: two nodes counting the
// same type in the same hour never write the same row, which would make
// one of the two transactions run again. The engine adds to an hour by
// reading it, adding and writing it back; so GetLatencyHour in a
// transaction that writes returns this node's part, and PutLatencyHour
// replaces it. Everywhere else (GetLatencyHour in View, LatencyHours,
// LatencyHoursBefore) the parts are merged, and DeleteLatencyHour deletes
// them all.

func (t *tx) GetLatencyHour(activityType string, hour time.Time) (*durablev1.LatencyRecord, error) {
	if err := checkPart("activity_type", activityType); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("latency of %q in the hour of %s", activityType, hour.UTC().Format(time.RFC3339))
	if !t.readOnly {
		l := new(durablev1.LatencyRecord)
		err := t.get(l, what, `SELECT record FROM latency_hours
			WHERE length(activity_type) = length($1::bytea) AND activity_type = $1 AND hour = $2 AND node = $3`,
			b(activityType), nanos(hour), t.s.node)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	parts, err := records(t, newLatency, what, `SELECT record FROM latency_hours
		WHERE length(activity_type) = length($1::bytea) AND activity_type = $1 AND hour = $2 ORDER BY node`,
		b(activityType), nanos(hour))
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%s: %w", what, engine.ErrNotFound)
	}
	for _, p := range parts[1:] {
		mergeLatency(parts[0], p)
	}
	return parts[0], nil
}

// mergeLatency adds the counts of src to dst, as the engine merges two
// records of one type.
func mergeLatency(dst, src *durablev1.LatencyRecord) {
	if n := len(src.GetBuckets()); len(dst.Buckets) < n {
		dst.Buckets = append(dst.Buckets, make([]int64, n-len(dst.Buckets))...)
	}
	for i, n := range src.GetBuckets() {
		dst.Buckets[i] += n
	}
	dst.Attempts += src.GetAttempts()
	dst.Failures += src.GetFailures()
	dst.MaxNs = max(dst.MaxNs, src.GetMaxNs())
}

// PutLatencyHour writes this node's part of the hour.
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
	return t.writeOne(fmt.Sprintf("put latency of %q in the hour of %s", l.GetActivityType(), hour.UTC().Format(time.RFC3339)),
		latencyHoursTable, b(l.GetActivityType()), nanos(hour), t.s.node, v)
}

const latencyHourOrder = "length(activity_type), activity_type, hour, node"

// latencyRow is one node's part of an hour of latency statistics, with its
// key.
type latencyRow struct {
	activityType []byte
	hour         int64
	node         string
	l            *durablev1.LatencyRecord
}

// scanLatency reads (activity_type, hour, node, record).
func scanLatency(cr pgx.CollectableRow) (latencyRow, error) {
	var x latencyRow
	var v []byte
	if err := cr.Scan(&x.activityType, &x.hour, &x.node, &v); err != nil {
		return x, err
	}
	x.l = new(durablev1.LatencyRecord)
	return x, unmarshal("latency hour", v, x.l)
}

// hourMerger merges the consecutive parts of each hour of a list ordered
// by latencyHourOrder and hands each merged hour to fn.
type hourMerger struct {
	fn   func(*durablev1.LatencyRecord) bool
	cur  *latencyRow
	stop bool // fn returned false
}

// add takes the next part; it reports whether fn wants more.
func (m *hourMerger) add(x latencyRow) bool {
	if m.cur != nil && string(m.cur.activityType) == string(x.activityType) && m.cur.hour == x.hour {
		mergeLatency(m.cur.l, x.l)
		return true
	}
	if !m.flush() {
		return false
	}
	m.cur = &x
	return true
}

// flush hands the hour being merged to fn.
func (m *hourMerger) flush() bool {
	if m.cur != nil && !m.stop {
		m.stop = !m.fn(m.cur.l)
	}
	m.cur = nil
	return !m.stop
}

func (t *tx) LatencyHours(since time.Time, fn func(*durablev1.LatencyRecord) bool) error {
	m := &hourMerger{fn: fn}
	_, more, err := walk(t.pageSize, nil, func(last *latencyRow) ([]latencyRow, error) {
		if last == nil {
			return collect(t, scanLatency, "SELECT activity_type, hour, node, record FROM latency_hours WHERE hour >= $2 ORDER BY "+latencyHourOrder+" LIMIT $1",
				t.pageSize, nanos(since))
		}
		return collect(t, scanLatency, `SELECT activity_type, hour, node, record FROM latency_hours WHERE hour >= $2
			AND (length(activity_type), activity_type, hour, node) > (length($3::bytea), $3, $4, $5) ORDER BY `+latencyHourOrder+" LIMIT $1",
			t.pageSize, nanos(since), last.activityType, last.hour, last.node)
	}, m.add)
	if err != nil {
		return fmt.Errorf("latency hours: %w", err)
	}
	if more {
		m.flush()
	}
	return nil
}

// LatencyHoursBefore returns up to limit hours, each its parts merged.
func (t *tx) LatencyHoursBefore(before time.Time, limit int) ([]*durablev1.LatencyRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := collect(t, scanLatency, `WITH hours AS (SELECT activity_type, hour FROM latency_hours WHERE hour < $1
			GROUP BY activity_type, hour ORDER BY length(activity_type), activity_type, hour LIMIT $2)
		SELECT activity_type, hour, node, record FROM latency_hours JOIN hours USING (activity_type, hour)
		ORDER BY `+latencyHourOrder, nanos(before), limit)
	if err != nil {
		return nil, fmt.Errorf("latency hours: %w", err)
	}
	var out []*durablev1.LatencyRecord
	m := &hourMerger{fn: func(l *durablev1.LatencyRecord) bool { out = append(out, l); return true }}
	for _, x := range rows {
		m.add(x)
	}
	m.flush()
	return out, nil
}

// DeleteLatencyHour deletes every node's part of the hour.
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
