package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

var _ engine.Prefetcher = (*tx)(nil)

// Prefetch reads the records keys name that the cache does not hold, with
// one statement per table in one round trip, and keeps them in the cache as
// GetActivity and GetWorkflow would have: found, or missing. A key with an
// id the store refuses is left to the read that refuses it, and keys past
// the cache's bound are not read.
func (t *tx) Prefetch(keys []engine.RecordKey) error {
	var wfs, actWfs, actIDs [][]byte
	want := make(map[recordKey]struct{}, len(keys))
	for _, k := range keys {
		if len(t.cache)+len(want) >= maxCached {
			break
		}
		rk := recordKey{table: cacheActivity, wf: k.WorkflowID, id: k.ActivityID}
		valid := checkPart("workflow_id", k.WorkflowID) == nil
		if k.ActivityID == "" {
			rk.table = cacheWorkflow
		} else {
			valid = valid && checkPart("activity_id", k.ActivityID) == nil
		}
		if !valid {
			continue
		}
		if _, known := t.cache[rk]; known {
			continue
		}
		if _, dup := want[rk]; dup {
			continue
		}
		want[rk] = struct{}{}
		if rk.table == cacheWorkflow {
			wfs = append(wfs, b(rk.wf))
		} else {
			actWfs, actIDs = append(actWfs, b(rk.wf)), append(actIDs, b(rk.id))
		}
	}
	if len(want) == 0 {
		return nil
	}
	found := make(map[recordKey]cachedRecord, len(want))
	batch := &pgx.Batch{}
	if len(actWfs) > 0 {
		// The state and queue columns are the record's (PutActivity
		// writes them from it): its count, known without decoding it.
		// A lateral join: one probe of the primary key per key, whatever
		// the planner guesses of the array's length. OFFSET 0 keeps the
		// subquery apart, so that the planner cannot turn it into a join
		// of the keys with the table: a connection keeps the plan it makes
		// at its first run (planCacheMode), and on a new database, whose
		// tables are empty then, the plan it made was a hash join that
		// read every activity at every run after.
		batch.Queue(`SELECT a.workflow_id, a.activity_id, a.record, a.state, a.task_queue
			FROM unnest($1::bytea[], $2::bytea[]) AS k (workflow_id, activity_id),
			LATERAL (SELECT * FROM activities WHERE workflow_id = k.workflow_id AND activity_id = k.activity_id OFFSET 0) a`, actWfs, actIDs).
			Query(func(rows pgx.Rows) error {
				var wf, id, v, queue []byte
				var state int16
				_, err := pgx.ForEachRow(rows, []any{&wf, &id, &v, &state, &queue}, func() error {
					found[recordKey{table: cacheActivity, wf: string(wf), id: string(id)}] = cachedRecord{
						v: v, ok: true, count: countRef{queue: string(queue), state: durablev1.ActivityState(state)},
					}
					return nil
				})
				return err
			})
	}
	if len(wfs) > 0 {
		batch.Queue("SELECT workflow_id, record FROM workflows WHERE workflow_id = ANY($1::bytea[])", wfs).
			Query(func(rows pgx.Rows) error {
				var wf, v []byte
				_, err := pgx.ForEachRow(rows, []any{&wf, &v}, func() error {
					found[recordKey{table: cacheWorkflow, wf: string(wf)}] = cachedRecord{v: v, ok: true}
					return nil
				})
				return err
			})
	}
	if err := t.send("prefetch records", batch); err != nil {
		return err
	}
	for rk := range want {
		t.keep(rk, found[rk]) // not found: the zero cachedRecord, missing
	}
	return nil
}
