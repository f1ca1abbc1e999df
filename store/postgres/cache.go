package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
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
	// rows are the queue entry and timers the record implies, which are
	// its rows in those tables, so that writing it again touches only the
	// rows that change; nil when not worked out (a missing record has
	// none).
	rows *indexRows
}

// indexRows are the rows of the queue and timers tables one record
// implies.
type indexRows struct {
	entry  engine.QueueEntry
	queued bool
	timers []engine.Timer
}

// known returns the rows c's record has in the index tables, or nil when
// the cache cannot say.
func (c cachedRecord) known() *indexRows {
	if !c.ok {
		return &indexRows{}
	}
	return c.rows
}

// sameEntry reports whether x and y are one row of the queue table.
func sameEntry(x, y engine.QueueEntry) bool {
	return x.Kind == y.Kind && x.Queue == y.Queue && nanos(x.Due) == nanos(y.Due) && x.Seq == y.Seq &&
		x.WorkflowID == y.WorkflowID && x.ActivityID == y.ActivityID
}

// sameTimers reports whether x and y are the same rows of the timers
// table, in the same order.
func sameTimers(x, y []engine.Timer) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if nanos(x[i].Due) != nanos(y[i].Due) || x[i].Kind != y[i].Kind || x[i].WorkflowID != y[i].WorkflowID || x[i].ID != y[i].ID {
			return false
		}
	}
	return true
}

// replaceRows adds to ws the writes that turn the rows record wf/id has in
// the index tables from old (nil: unknown) into new: with old known, only
// the rows that change are deleted and inserted. A record's rows are its
// queue entries of kind task and its timers of the group of timer.
func replaceRows(ws *writeSet, old *indexRows, new indexRows, wf, id string, task engine.TaskKind, timer engine.TimerKind) {
	keepEntry := old != nil && old.queued && new.queued && sameEntry(old.entry, new.entry)
	if !keepEntry {
		if old == nil || old.queued {
			ws.deleteEntries(wf, id, task)
		}
		if new.queued {
			ws.insertEntry(new.entry)
		}
	}
	if old != nil && sameTimers(old.timers, new.timers) {
		return
	}
	if old == nil || len(old.timers) > 0 {
		ws.deleteTimers(wf, id, timer)
	}
	for _, tm := range new.timers {
		ws.insertTimer(tm)
	}
}

func activityRows(a *durablev1.ActivityRecord) *indexRows {
	e, ok := engine.QueueEntryOf(a)
	return &indexRows{entry: e, queued: ok, timers: engine.TimersOf(a)}
}

func workflowRows(w *durablev1.WorkflowRecord) *indexRows {
	e, ok := engine.WorkflowQueueEntryOf(w)
	return &indexRows{entry: e, queued: ok, timers: engine.WorkflowTimersOf(w)}
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
