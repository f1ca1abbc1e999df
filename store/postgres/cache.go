package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
)

// A transaction keeps the records it read or wrote, encoded, and serves a
// later read of one from memory: the engine reads an activity in each
// transition that touches it (the transition itself, the activity counts'
// bookkeeping, a delete's read of the old row) and the workflow of every
// activity a batch completes. Under repeatable read a transaction sees one
// snapshot and its own writes, so a record read once reads the same until the
// transaction writes it, and the only writer of the activities, workflows and
// latency tables is this store's Put and Delete, which keep the cache. A
// record found missing is kept as missing. The cache lives and dies with one
// attempt of the transaction: an attempt run again starts empty.

// maxCached bounds the records a transaction keeps; past it, reads go to
// the database (a transaction that walks thousands of records gains nothing
// from keeping them).
const maxCached = 4096

// Tables of the cache.
const (
	cacheActivity byte = iota
	cacheWorkflow
	cacheLatency
)

// recordKey names a record of a cached table.
type recordKey struct {
	table  byte
	wf, id string
}

// cachedRecord is a record as the transaction last saw it.
type cachedRecord struct {
	v  []byte // encoded
	ok bool   // false: no such record
	// count is an activity's count (zero state: none), so that writing it
	// again knows which count it leaves without asking the database.
	count countRef
}

// keep notes what the transaction saw or wrote of k.
func (t *tx) keep(k recordKey, c cachedRecord) {
	if t.cache == nil {
		t.cache = make(map[recordKey]cachedRecord)
	}
	if _, ok := t.cache[k]; !ok && len(t.cache) >= maxCached {
		return
	}
	t.cache[k] = c
}

// cached reads the record k names into m: from the cache, or with sql (one
// record column, no row when there is no record), keeping what it read. It
// returns what the cache holds of k now.
func (t *tx) cached(k recordKey, m proto.Message, what, sql string, args ...any) (cachedRecord, error) {
	c, hit := t.cache[k]
	if !hit {
		var v []byte
		switch err := t.q.QueryRow(t.ctx, sql, args...).Scan(&v); {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return c, fmt.Errorf("%s: %w", what, err)
		default:
			c = cachedRecord{v: v, ok: true}
		}
		t.keep(k, c)
	}
	if !c.ok {
		return c, fmt.Errorf("%s: %w", what, engine.ErrNotFound)
	}
	return c, unmarshal(what, c.v, m)
}
