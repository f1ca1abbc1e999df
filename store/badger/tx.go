package badger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// tx is one Badger transaction seen through engine.Tx. Record writers read the
// old record in the same transaction so that its index entries can be
// replaced together with it.
type tx struct {
	txn       *badgerdb.Txn
	maxRecord int
	// update is set in a read-write transaction, where records remembers
	// what was read and written (known.go).
	update  bool
	records map[string]knownRecord
	// written counts the bytes of the records put (Options.WroteFunc).
	written int
	// toVlog is set once a value went to Badger's value log (logSync).
	toVlog bool
	// counts holds the moves of the activity counts not yet written, by
	// count key: a batch of transitions moves the same few counts many
	// times, so they are written once, when the transaction ends
	// (flushCounts).
	counts map[countRef]int64
	// recent is set in a read-write transaction: records read and written
	// go through it (recent.go).
	recent *recentRead
}

var _ engine.Tx = (*tx)(nil)

// get reads the record at key into m; a missing key is engine.ErrNotFound.
// A record the transaction knows to be missing (read as missing, deleted,
// or under an activity id just found unused) is not looked for.
func (t *tx) get(key []byte, m proto.Message) error {
	if k, ok := t.known(key); ok && !k.exists {
		return engine.ErrNotFound
	}
	recent := t.recent != nil && recentKey(key)
	if recent {
		if v, ok := t.recent.lookup(key); ok {
			if v == nil {
				return engine.ErrNotFound
			}
			return unmarshal(key, v, m)
		}
	}
	item, err := t.txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		if recent {
			t.recent.noteRead(key, nil)
		}
		return engine.ErrNotFound
	}
	if err != nil {
		return err
	}
	return item.Value(func(v []byte) error {
		// An item of Txn.Get holds a value kept in the log entry (below
		// valueThreshold) in a buffer of its own, which outlives the call;
		// a larger one may be the value log's memory, lent for the call.
		if recent && len(v) < valueThreshold {
			t.recent.noteRead(key, v)
		}
		return unmarshal(key, v, m)
	})
}

// unmarshal decodes the record at key from v, a value Badger lends only for
// the length of an Item.Value call: every read decodes inside that call
// rather than copying the value first. m may keep nothing of v, and does
// not: proto.Unmarshal (default options, without UnmarshalAliasBuffer)
// copies bytes fields (append to an empty slice), strings (string(v)) and
// unknown fields. The copies that remain are Badger's: Txn.Get copies the
// value out of the memtable or table (y.SafeCopy), and Item.Value copies an
// inline value again into the item's buffer; its API offers no read without
// them, so the lever there is reading less (known.go).
func unmarshal(key, v []byte, m proto.Message) error {
	if err := proto.Unmarshal(v, m); err != nil {
		return fmt.Errorf("record at %x: %w: %w", key, errCorrupt, err)
	}
	return nil
}

func (t *tx) put(key []byte, m proto.Message) error {
	v, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("marshal %T: %w", m, err)
	}
	if len(v) > t.maxRecord {
		return &engine.InvalidError{Field: "record", Reason: fmt.Sprintf("%d bytes encoded, more than the store's limit of %d", len(v), t.maxRecord)}
	}
	t.written += len(key) + len(v)
	// Badger keeps a value in its log entry below the threshold and in the
	// value log from it on (skipVlogAndSetThreshold).
	t.toVlog = t.toVlog || len(v) >= valueThreshold
	if err := t.txn.Set(key, v); err != nil {
		return err
	}
	if t.recent != nil && recentKey(key) {
		t.recent.noteWrite(key, v)
	}
	return nil
}

// each calls fn with the key and value of every record under prefix, in key
// order, until fn returns false. The key is only valid during the call.
func (t *tx) each(prefix []byte, fn func(key, val []byte) (bool, error)) error {
	return t.eachFrom(prefix, nil, fn)
}

// eachFrom is each for the records under prefix from the key start on (from
// the first, for nil).
//
// Values are not prefetched: Badger prefetches by starting a goroutine per
// item, to copy a value that, below valueThreshold, sits in the log entry
// already read and that Item.Value copies as cheaply; for the history of a
// workflow task those goroutines and the reader's waits on them cost more
// than the copies.
func (t *tx) eachFrom(prefix, start []byte, fn func(key, val []byte) (bool, error)) error {
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix})
	defer it.Close()
	if start == nil {
		start = prefix
	}
	for it.Seek(start); it.Valid(); it.Next() {
		item := it.Item()
		var more bool
		err := item.Value(func(v []byte) error {
			var err error
			more, err = fn(item.Key(), v)
			return err
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *tx) GetWorkflow(id string) (*durablev1.WorkflowRecord, error) {
	if err := checkPart("workflow_id", id); err != nil {
		return nil, err
	}
	key := workflowKey(id)
	w := new(durablev1.WorkflowRecord)
	if err := t.get(key, w); err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			t.remember(key, knownRecord{})
		}
		return nil, fmt.Errorf("workflow %q: %w", id, err)
	}
	if _, ok := t.known(key); t.update && !ok {
		t.remember(key, knownRecord{exists: true, index: workflowIndexKeys(w)})
	}
	return w, nil
}

func (t *tx) PutWorkflow(w *durablev1.WorkflowRecord) error {
	id := w.GetInfo().GetWorkflowId()
	if err := firstErr(checkPart("workflow_id", id), checkPart("task_queue", w.GetInfo().GetTaskQueue())); err != nil {
		return err
	}
	key := workflowKey(id)
	old, err := t.knownWorkflow(id, key)
	if err != nil {
		return err
	}
	idx := workflowIndexKeys(w)
	if err := t.put(key, w); err != nil {
		t.forget(key)
		return fmt.Errorf("put workflow %q: %w", id, err)
	}
	if err := t.replaceIndex(old.index, idx); err != nil {
		t.forget(key)
		return err
	}
	t.remember(key, knownRecord{exists: true, index: idx})
	return nil
}

// knownWorkflow is knownActivity for a workflow.
func (t *tx) knownWorkflow(id string, key []byte) (knownRecord, error) {
	if k, ok := t.known(key); ok {
		return k, nil
	}
	w, err := t.GetWorkflow(id)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return knownRecord{}, nil
	case err != nil:
		return knownRecord{}, err
	}
	if k, ok := t.known(key); ok {
		return k, nil
	}
	return knownRecord{exists: true, index: workflowIndexKeys(w)}, nil
}

func (t *tx) ListWorkflows(after string, limit int) ([]*durablev1.WorkflowRecord, error) {
	if limit <= 0 {
		return nil, nil
	}
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixWorkflow}, PrefetchValues: true, PrefetchSize: min(limit, 100)})
	defer it.Close()
	start := workflowKey(after)
	var out []*durablev1.WorkflowRecord
	for it.Seek(start); it.Valid() && len(out) < limit; it.Next() {
		item := it.Item()
		if after != "" && string(item.Key()) == string(start) {
			continue
		}
		w := new(durablev1.WorkflowRecord)
		if err := item.Value(func(v []byte) error { return unmarshal(item.Key(), v, w) }); err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func (t *tx) AppendEvents(workflowID string, events []*durablev1.HistoryEvent) error {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return err
	}
	for _, ev := range events {
		if err := t.put(historyKey(workflowID, ev.GetEventId()), ev); err != nil {
			return fmt.Errorf("append event %d of workflow %q: %w", ev.GetEventId(), workflowID, err)
		}
	}
	return nil
}

func (t *tx) History(workflowID string) ([]*durablev1.HistoryEvent, error) {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return nil, err
	}
	var out []*durablev1.HistoryEvent
	err := t.each(historyPrefix(workflowID), func(k, v []byte) (bool, error) {
		ev := new(durablev1.HistoryEvent)
		out = append(out, ev)
		return true, unmarshal(k, v, ev)
	})
	if err != nil {
		return nil, fmt.Errorf("history of workflow %q: %w", workflowID, err)
	}
	return out, nil
}

func (t *tx) HistoryRange(workflowID string, from, through int64) ([]*durablev1.HistoryEvent, error) {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return nil, err
	}
	if from < 1 {
		from = 1
	}
	if through < from {
		return nil, nil
	}
	end := historyKey(workflowID, through)
	var out []*durablev1.HistoryEvent
	err := t.eachFrom(historyPrefix(workflowID), historyKey(workflowID, from), func(k, v []byte) (bool, error) {
		if bytes.Compare(k, end) > 0 {
			return false, nil
		}
		ev := new(durablev1.HistoryEvent)
		out = append(out, ev)
		return true, unmarshal(k, v, ev)
	})
	if err != nil {
		return nil, fmt.Errorf("history of workflow %q: %w", workflowID, err)
	}
	return out, nil
}

func (t *tx) GetActivity(workflowID, activityID string) (*durablev1.ActivityRecord, error) {
	if err := firstErr(checkPart("workflow_id", workflowID), checkPart("activity_id", activityID)); err != nil {
		return nil, err
	}
	key := activityKey(workflowID, activityID)
	a := new(durablev1.ActivityRecord)
	if err := t.get(key, a); err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			t.remember(key, knownRecord{})
		}
		return nil, fmt.Errorf("activity %s/%s: %w", workflowID, activityID, err)
	}
	if _, ok := t.known(key); t.update && !ok {
		t.remember(key, knownActivityOf(a))
	}
	return a, nil
}

// knownActivity returns what the transaction knows of an activity, reading
// it when it knows nothing yet.
func (t *tx) knownActivity(workflowID, activityID string, key []byte) (knownRecord, error) {
	if k, ok := t.known(key); ok {
		return k, nil
	}
	a, err := t.GetActivity(workflowID, activityID)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return knownRecord{}, nil
	case err != nil:
		return knownRecord{}, err
	}
	if k, ok := t.known(key); ok {
		return k, nil
	}
	return knownActivityOf(a), nil // a view remembers nothing
}

func knownActivityOf(a *durablev1.ActivityRecord) knownRecord {
	return knownRecord{exists: true, index: activityIndexKeys(a), count: countRefOf(a)}
}

func (t *tx) PutActivity(a *durablev1.ActivityRecord) error {
	in := a.GetInfo()
	wf, id := in.GetWorkflowId(), in.GetActivityId()
	if err := firstErr(checkPart("workflow_id", wf), checkPart("activity_id", id), checkPart("task_queue", in.GetTaskQueue())); err != nil {
		return err
	}
	key := activityKey(wf, id)
	old, err := t.knownActivity(wf, id, key)
	if err != nil {
		return err
	}
	next := knownActivityOf(a)
	if err := t.put(key, a); err != nil {
		t.forget(key)
		return fmt.Errorf("put activity %s/%s: %w", wf, id, err)
	}
	if err := t.replaceIndex(old.index, next.index); err != nil {
		t.forget(key)
		return err
	}
	t.moveCount(old.count, next.count)
	t.remember(key, next)
	return nil
}

// moveCount moves an activity from one count to another; the zero countRef
// on either side is none (a new or deleted record).
func (t *tx) moveCount(from, to countRef) {
	if from == to {
		return
	}
	if t.counts == nil {
		t.counts = map[countRef]int64{}
	}
	if from.state != 0 {
		t.counts[from]--
	}
	if to.state != 0 {
		t.counts[to]++
	}
}

// countRef names one activity count: a task queue and a state.
type countRef struct {
	queue string
	state durablev1.ActivityState
}

func countRefOf(a *durablev1.ActivityRecord) countRef {
	if a == nil {
		return countRef{}
	}
	return countRef{queue: a.GetInfo().GetTaskQueue(), state: a.GetInfo().GetState()}
}

// countKeyOf is the key of the count an activity record is in; nil for
// none.
func countKeyOf(a *durablev1.ActivityRecord) []byte {
	r := countRefOf(a)
	if r.state == 0 {
		return nil
	}
	return activityCountKey(r.state, r.queue)
}

// flushCounts writes the moves of the activity counts noted so far.
func (t *tx) flushCounts() error {
	for r, delta := range t.counts {
		if delta == 0 {
			continue
		}
		key := activityCountKey(r.state, r.queue)
		n, err := t.count(key)
		if err != nil {
			return err
		}
		if n += delta; n <= 0 {
			err = t.txn.Delete(key)
		} else {
			err = t.txn.Set(key, encodeCounter(n))
		}
		if err != nil {
			return fmt.Errorf("activity count %x: %w", key, err)
		}
	}
	clear(t.counts)
	return nil
}

func (t *tx) count(key []byte) (int64, error) {
	item, err := t.txn.Get(key)
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("activity count %x: %w", key, err)
	}
	var n int64
	err = item.Value(func(v []byte) error {
		n, err = decodeCounter(v)
		return err
	})
	return n, err
}

func (t *tx) ActivityCounts(fn func(taskQueue string, state durablev1.ActivityState, n int64) bool) (bool, error) {
	if v, err := t.indexVersion(); err != nil || v < countsVersion {
		return false, err
	}
	if err := t.flushCounts(); err != nil {
		return false, err
	}
	err := t.each([]byte{prefixActivityCount}, func(k, v []byte) (bool, error) {
		state, queue, err := decodeActivityCountKey(k)
		if err != nil {
			return false, err
		}
		n, err := decodeCounter(v)
		if err != nil {
			return false, err
		}
		return fn(queue, state, n), nil
	})
	return err == nil, err
}

// indexVersion is what the data directory says of its indexes (0 when it
// says nothing: written before keyIndexVersion existed).
func (t *tx) indexVersion() (uint64, error) {
	item, err := t.txn.Get(indexVersionKey())
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("index version: %w", err)
	}
	var v uint64
	err = item.Value(func(b []byte) error {
		if len(b) != 8 {
			return fmt.Errorf("index version of %d bytes: %w", len(b), errCorrupt)
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	return v, err
}

func (t *tx) DeleteActivity(workflowID, activityID string) error {
	key := activityKey(workflowID, activityID)
	old, err := t.knownActivity(workflowID, activityID, key)
	if err != nil {
		return err
	}
	if !old.exists {
		return fmt.Errorf("activity %s/%s: %w", workflowID, activityID, engine.ErrNotFound)
	}
	if err := t.txn.Delete(key); err != nil {
		t.forget(key)
		return fmt.Errorf("delete activity %s/%s: %w", workflowID, activityID, err)
	}
	if t.recent != nil {
		t.recent.noteWrite(key, nil)
	}
	if err := t.replaceIndex(old.index, nil); err != nil {
		t.forget(key)
		return err
	}
	t.moveCount(old.count, countRef{})
	t.remember(key, knownRecord{})
	return nil
}

func (t *tx) UseActivityID(workflowID, activityID string) (bool, error) {
	if err := firstErr(checkPart("workflow_id", workflowID), checkPart("activity_id", activityID)); err != nil {
		return false, err
	}
	key := activityIDKey(workflowID, activityID)
	switch _, err := t.txn.Get(key); {
	case err == nil:
		return true, nil
	case !errors.Is(err, badgerdb.ErrKeyNotFound):
		return false, fmt.Errorf("activity id %s/%s: %w", workflowID, activityID, err)
	}
	if err := t.txn.Set(key, nil); err != nil {
		return false, fmt.Errorf("record activity id %s/%s: %w", workflowID, activityID, err)
	}
	// An activity record exists only under an id that was used, so this
	// one has none: the schedule that follows writes it without reading it
	// first (a workflow task scheduling 50 activities looked up 50 keys
	// that could not exist, each through every level of Badger's tree).
	t.remember(activityKey(workflowID, activityID), knownRecord{})
	return false, nil
}

func (t *tx) Activities(workflowID string) ([]*durablev1.ActivityRecord, error) {
	if err := checkPart("workflow_id", workflowID); err != nil {
		return nil, err
	}
	var out []*durablev1.ActivityRecord
	err := t.each(activityPrefix(workflowID), func(k, v []byte) (bool, error) {
		a := new(durablev1.ActivityRecord)
		out = append(out, a)
		if err := unmarshal(k, v, a); err != nil {
			return false, err
		}
		if _, ok := t.known(k); t.update && !ok {
			t.remember(k, knownActivityOf(a))
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("activities of workflow %q: %w", workflowID, err)
	}
	return out, nil
}

// ScanActivities reads the records in pages, so that fn may wait (see
// pages).
func (t *tx) ScanActivities(fn func(*durablev1.ActivityRecord) bool) error {
	read := func(item *badgerdb.Item) (*durablev1.ActivityRecord, bool, error) {
		a := new(durablev1.ActivityRecord)
		err := item.Value(func(v []byte) error { return unmarshal(item.Key(), v, a) })
		return a, err == nil, err
	}
	return pages(t, pageScan{prefix: []byte{prefixActivity}, values: true}, read, func(a *durablev1.ActivityRecord) (bool, error) {
		return fn(a), nil
	})
}

func (t *tx) GetTimer(workflowID, timerID string) (*durablev1.TimerRecord, error) {
	if err := firstErr(checkPart("workflow_id", workflowID), checkPart("timer_id", timerID)); err != nil {
		return nil, err
	}
	r := new(durablev1.TimerRecord)
	if err := t.get(timerKey(workflowID, timerID), r); err != nil {
		return nil, fmt.Errorf("timer %s/%s: %w", workflowID, timerID, err)
	}
	return r, nil
}

func (t *tx) PutTimer(r *durablev1.TimerRecord) error {
	wf, id := r.GetWorkflowId(), r.GetTimerId()
	if err := firstErr(checkPart("workflow_id", wf), checkPart("timer_id", id)); err != nil {
		return err
	}
	key := timerKey(wf, id)
	var oldIdx [][]byte
	old := new(durablev1.TimerRecord)
	switch err := t.get(key, old); {
	case err == nil:
		oldIdx = [][]byte{timerIndexKey(engine.UserTimerOf(old))}
	case !errors.Is(err, engine.ErrNotFound):
		return fmt.Errorf("timer %s/%s: %w", wf, id, err)
	}
	if err := t.put(key, r); err != nil {
		return fmt.Errorf("put timer %s/%s: %w", wf, id, err)
	}
	return t.replaceIndex(oldIdx, [][]byte{timerIndexKey(engine.UserTimerOf(r))})
}

func (t *tx) DeleteTimer(workflowID, timerID string) error {
	old, err := t.GetTimer(workflowID, timerID)
	if err != nil {
		return err
	}
	if err := t.txn.Delete(timerKey(workflowID, timerID)); err != nil {
		return fmt.Errorf("delete timer %s/%s: %w", workflowID, timerID, err)
	}
	return t.replaceIndex([][]byte{timerIndexKey(engine.UserTimerOf(old))}, nil)
}

func (t *tx) GetLatency(activityType string) (*durablev1.LatencyRecord, error) {
	if err := checkPart("activity_type", activityType); err != nil {
		return nil, err
	}
	l := new(durablev1.LatencyRecord)
	if err := t.get(latencyKey(activityType), l); err != nil {
		return nil, fmt.Errorf("latency of %q: %w", activityType, err)
	}
	return l, nil
}

func (t *tx) PutLatency(l *durablev1.LatencyRecord) error {
	if err := checkPart("activity_type", l.GetActivityType()); err != nil {
		return err
	}
	if err := t.put(latencyKey(l.GetActivityType()), l); err != nil {
		return fmt.Errorf("put latency of %q: %w", l.GetActivityType(), err)
	}
	return nil
}

func (t *tx) ListLatency() ([]*durablev1.LatencyRecord, error) {
	var out []*durablev1.LatencyRecord
	err := t.each([]byte{prefixLatency}, func(k, v []byte) (bool, error) {
		l := new(durablev1.LatencyRecord)
		out = append(out, l)
		return true, unmarshal(k, v, l)
	})
	if err != nil {
		return nil, fmt.Errorf("list latency: %w", err)
	}
	return out, nil
}

func (t *tx) PutAudit(r *durablev1.AuditRecord) error {
	if err := t.put(auditKey(r.GetTime().AsTime(), r.GetId()), r); err != nil {
		return fmt.Errorf("put audit record %d: %w", r.GetId(), err)
	}
	return nil
}

func (t *tx) AuditRecords(after []byte, fn func(*durablev1.AuditRecord) bool) ([]byte, error) {
	if len(after) > 0 && (after[0] != prefixAudit || len(after) != 17) {
		return nil, &engine.InvalidError{Field: "next_page_token", Reason: "is not a page token of the audit log"}
	}
	prefix := []byte{prefixAudit}
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix, Reverse: true, PrefetchValues: true, PrefetchSize: 16})
	defer it.Close()
	// A reverse iterator seeks to the last key at or before the seek key:
	// past the end of the table for the newest, the cursor itself (skipped
	// below) for the next page.
	seek := []byte{prefixAudit, 0xff}
	if len(after) > 0 {
		seek = after
	}
	var last []byte
	for it.Seek(seek); it.Valid(); it.Next() {
		item := it.Item()
		if len(after) > 0 && string(item.Key()) == string(after) {
			continue
		}
		r := new(durablev1.AuditRecord)
		if err := item.Value(func(v []byte) error { return unmarshal(item.Key(), v, r) }); err != nil {
			return nil, err
		}
		last = item.KeyCopy(nil)
		if !fn(r) {
			break
		}
	}
	return last, nil
}

func (t *tx) DeleteAuditBefore(before time.Time, limit int) (int, error) {
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixAudit}})
	end := appendTime([]byte{prefixAudit}, before)
	var keys [][]byte
	for it.Rewind(); it.Valid() && len(keys) < limit; it.Next() {
		k := it.Item().Key()
		if string(k[:min(len(k), len(end))]) >= string(end) {
			break
		}
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range keys {
		if err := t.txn.Delete(k); err != nil {
			return 0, fmt.Errorf("delete audit record: %w", err)
		}
	}
	return len(keys), nil
}

func (t *tx) GetAudit(at time.Time, id int64) (*durablev1.AuditRecord, error) {
	r := new(durablev1.AuditRecord)
	if err := t.get(auditKey(at, id), r); err != nil {
		return nil, fmt.Errorf("audit record %d: %w", id, err)
	}
	return r, nil
}

func (t *tx) GetOperation(seq int64) (*durablev1.OperationRecord, error) {
	r := new(durablev1.OperationRecord)
	if err := t.get(operationKey(seq), r); err != nil {
		return nil, fmt.Errorf("operation %d: %w", seq, err)
	}
	return r, nil
}

func (t *tx) PutOperation(r *durablev1.OperationRecord) error {
	if err := t.put(operationKey(r.GetSeq()), r); err != nil {
		return fmt.Errorf("put operation %d: %w", r.GetSeq(), err)
	}
	return nil
}

func (t *tx) DeleteOperation(seq int64) error {
	if err := t.txn.Delete(operationKey(seq)); err != nil {
		return fmt.Errorf("delete operation %d: %w", seq, err)
	}
	return nil
}

func (t *tx) Operations(after []byte, fn func(*durablev1.OperationRecord) bool) ([]byte, error) {
	if len(after) > 0 && (after[0] != prefixOperation || len(after) != 9) {
		return nil, &engine.InvalidError{Field: "next_page_token", Reason: "is not a page token of the operations list"}
	}
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte{prefixOperation}, Reverse: true, PrefetchValues: true, PrefetchSize: 16})
	defer it.Close()
	// As in AuditRecords: past the end of the table for the newest, the
	// cursor itself (skipped below) for the next page.
	seek := []byte{prefixOperation, 0xff}
	if len(after) > 0 {
		seek = after
	}
	var last []byte
	for it.Seek(seek); it.Valid(); it.Next() {
		item := it.Item()
		if len(after) > 0 && string(item.Key()) == string(after) {
			continue
		}
		r := new(durablev1.OperationRecord)
		if err := item.Value(func(v []byte) error { return unmarshal(item.Key(), v, r) }); err != nil {
			return nil, err
		}
		last = item.KeyCopy(nil)
		if !fn(r) {
			break
		}
	}
	return last, nil
}

func (t *tx) PutOperationItems(seq, from int64, refs []*durablev1.ActivityRef) error {
	for i, ref := range refs {
		if err := t.put(operationItemKey(seq, from+int64(i)), ref); err != nil {
			return fmt.Errorf("put item %d of operation %d: %w", from+int64(i), seq, err)
		}
	}
	return nil
}

func (t *tx) OperationItems(seq, from int64, limit int) ([]*durablev1.ActivityRef, error) {
	if limit <= 0 {
		return nil, nil
	}
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: operationItemPrefix(seq), PrefetchValues: true, PrefetchSize: min(limit, 100)})
	defer it.Close()
	var out []*durablev1.ActivityRef
	for it.Seek(operationItemKey(seq, from)); it.Valid() && len(out) < limit; it.Next() {
		item := it.Item()
		// The work list is written whole when the operation starts, so a
		// gap means the store lost a key.
		if _, index, err := decodeOperationItemKey(item.Key()); err != nil || index != from+int64(len(out)) {
			return nil, fmt.Errorf("work list of operation %d: item %d missing: %w", seq, from+int64(len(out)), errCorrupt)
		}
		ref := new(durablev1.ActivityRef)
		if err := item.Value(func(v []byte) error { return unmarshal(item.Key(), v, ref) }); err != nil {
			return nil, err
		}
		out = append(out, ref)
	}
	return out, nil
}

func (t *tx) DeleteOperationItems(seq int64, limit int) (int, error) {
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: operationItemPrefix(seq)})
	var keys [][]byte
	for it.Rewind(); it.Valid() && len(keys) < limit; it.Next() {
		keys = append(keys, it.Item().KeyCopy(nil))
	}
	it.Close()
	for _, k := range keys {
		if err := t.txn.Delete(k); err != nil {
			return 0, fmt.Errorf("delete item of operation %d: %w", seq, err)
		}
	}
	return len(keys), nil
}

// Counter returns the engine's id sequence; a new store starts at 0.
func (t *tx) Counter() (int64, error) {
	item, err := t.txn.Get(counterKey())
	if errors.Is(err, badgerdb.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("counter: %w", err)
	}
	var n int64
	err = item.Value(func(v []byte) error {
		n, err = decodeCounter(v)
		return err
	})
	return n, err
}

func (t *tx) SetCounter(n int64) error {
	if err := t.txn.Set(counterKey(), encodeCounter(n)); err != nil {
		return fmt.Errorf("set counter: %w", err)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
