package badger

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The index entries of a record are derived from the record alone, with the
// engine's functions, so that replacing a record knows exactly which entries
// to remove: those of the old record as read in the same transaction.

// activityIndexKeys returns the queue, timer, dead-letter and state keys an
// activity record implies.
func activityIndexKeys(a *durablev1.ActivityRecord) [][]byte {
	in := a.GetInfo()
	var keys [][]byte
	if in.GetState() != durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED {
		keys = append(keys, activityStateKey(in.GetState(), in.GetActivityType(), in.GetWorkflowId(), in.GetActivityId()))
	}
	if e, ok := engine.QueueEntryOf(a); ok {
		keys = append(keys, queueKey(e))
	}
	for _, tm := range engine.TimersOf(a) {
		keys = append(keys, timerIndexKey(tm))
	}
	if engine.IsDeadLetter(a) {
		keys = append(keys, deadLetterKey(in.GetDeadLetteredTime().AsTime(), in.GetWorkflowId(), in.GetActivityId()))
	}
	return keys
}

// workflowIndexKeys returns the queue, timer and status keys a workflow
// record implies: a running workflow is in the running index, one that
// closed in the closed index under its close time.
func workflowIndexKeys(w *durablev1.WorkflowRecord) [][]byte {
	var keys [][]byte
	switch in := w.GetInfo(); in.GetStatus() {
	case durablev1.WorkflowStatus_WORKFLOW_STATUS_UNSPECIFIED:
	case durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING:
		keys = append(keys, workflowRunningKey(in.GetWorkflowId()))
	default:
		keys = append(keys, workflowClosedKey(in.GetCloseTime().AsTime(), in.GetWorkflowId()))
	}
	if e, ok := engine.WorkflowQueueEntryOf(w); ok {
		keys = append(keys, queueKey(e))
	}
	for _, tm := range engine.WorkflowTimersOf(w) {
		keys = append(keys, timerIndexKey(tm))
	}
	return keys
}

// replaceIndex deletes the old entries that are not among the new ones and
// writes the new ones that are not among the old ones. Index entries carry no
// value: the key is the whole entry.
func (t *tx) replaceIndex(old, next [][]byte) error {
	has := func(set [][]byte, k []byte) bool {
		for _, s := range set {
			if bytes.Equal(s, k) {
				return true
			}
		}
		return false
	}
	for _, k := range old {
		if !has(next, k) {
			if err := t.txn.Delete(k); err != nil {
				return fmt.Errorf("delete index entry %x: %w", k, err)
			}
		}
	}
	for _, k := range next {
		if !has(old, k) {
			if err := t.txn.Set(k, nil); err != nil {
				return fmt.Errorf("set index entry %x: %w", k, err)
			}
		}
	}
	return nil
}

// eachKey calls fn with every key under prefix, from seek on (the prefix when
// seek is nil), until fn returns false. Values are not read. The key is only
// valid during the call.
func (t *tx) eachKey(prefix, seek []byte, fn func(key []byte) (bool, error)) error {
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix})
	defer it.Close()
	if seek == nil {
		seek = prefix
	}
	for it.Seek(seek); it.Valid(); it.Next() {
		if more, err := fn(it.Item().Key()); err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *tx) Queued(kind engine.TaskKind, queue string, limit int) ([]engine.QueueEntry, error) {
	if err := checkPart("task_queue", queue); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	var out []engine.QueueEntry
	err := t.eachKey(queuePrefix(kind, queue), nil, func(k []byte) (bool, error) {
		e, err := decodeQueueKey(k)
		if err != nil {
			return false, err
		}
		out = append(out, e)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue %q: %w", queue, err)
	}
	return out, nil
}

func (t *tx) QueuedIn(kind engine.TaskKind, r engine.TimeRange, fn func(engine.QueueEntry) bool) error {
	prefix := append(newKey(prefixQueue, 1), byte(kind))
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: prefix})
	defer it.Close()
	// Each queue is a range sorted by due time: seek to the start of r in
	// it, read to the end of r, then seek past the queue's last entry (no
	// due time encodes with a first byte of 0xff) to the next queue.
	it.Seek(prefix)
	for it.Valid() {
		e, err := decodeQueueKey(it.Item().Key())
		if err != nil {
			return err
		}
		qp := queuePrefix(kind, e.Queue)
		if !r.From.IsZero() && e.Due.Before(r.From) {
			it.Seek(appendTime(qp, r.From))
			if !it.Valid() || !bytes.HasPrefix(it.Item().Key(), qp) {
				it.Seek(append(qp, 0xff))
				continue
			}
		}
		for ; it.Valid() && bytes.HasPrefix(it.Item().Key(), qp); it.Next() {
			e, err := decodeQueueKey(it.Item().Key())
			if err != nil {
				return err
			}
			if !r.Before.IsZero() && !e.Due.Before(r.Before) {
				break
			}
			if !fn(e) {
				return nil
			}
		}
		it.Seek(append(qp, 0xff))
	}
	return nil
}

func (t *tx) TimersIn(r engine.TimeRange, fn func(engine.Timer) bool) error {
	prefix := []byte{prefixTimerIndex}
	seek := prefix
	if !r.From.IsZero() {
		seek = appendTime(newKey(prefixTimerIndex, 8), r.From)
	}
	return t.eachKey(prefix, seek, func(k []byte) (bool, error) {
		tm, err := decodeTimerIndexKey(k)
		if err != nil {
			return false, err
		}
		if !r.Before.IsZero() && !tm.Due.Before(r.Before) {
			return false, nil
		}
		return fn(tm), nil
	})
}

func (t *tx) DueTimers(limit int) ([]engine.Timer, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []engine.Timer
	err := t.eachKey([]byte{prefixTimerIndex}, nil, func(k []byte) (bool, error) {
		tm, err := decodeTimerIndexKey(k)
		if err != nil {
			return false, err
		}
		out = append(out, tm)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, fmt.Errorf("timers: %w", err)
	}
	return out, nil
}

// DeadLetters walks the whole dead-letter index.
func (t *tx) DeadLetters(after []byte, fn func(*durablev1.ActivityRecord) bool) ([]byte, error) {
	return t.DeadLettersIn(engine.TimeRange{}, after, fn)
}

// DeadLettersIn walks the dead-letter index from r.From (or the cursor, if
// it is further) to r.Before. The cursor is an index key; one that is not (a
// corrupt or foreign page token) is an *engine.InvalidError.
func (t *tx) DeadLettersIn(r engine.TimeRange, after []byte, fn func(*durablev1.ActivityRecord) bool) ([]byte, error) {
	prefix := []byte{prefixDeadLetter}
	if after != nil {
		if _, err := decodeDeadLetterKey(after); err != nil {
			return nil, &engine.InvalidError{Field: "next_page_token", Reason: "not a dead-letter cursor"}
		}
	}
	seek := after
	if !r.From.IsZero() {
		if from := appendTime(bytes.Clone(prefix), r.From); bytes.Compare(from, seek) > 0 {
			seek = from
		}
	}
	var end []byte
	if !r.Before.IsZero() {
		end = appendTime(bytes.Clone(prefix), r.Before)
	}
	var last []byte
	err := t.eachKey(prefix, seek, func(k []byte) (bool, error) {
		if after != nil && bytes.Equal(k, after) {
			return true, nil
		}
		if end != nil && bytes.Compare(k, end) >= 0 {
			return false, nil
		}
		ref, err := decodeDeadLetterKey(k)
		if err != nil {
			return false, err
		}
		a, err := t.indexed(ref.workflowID, ref.activityID, "dead-letter")
		if err != nil {
			return false, err
		}
		last = bytes.Clone(k)
		return fn(a), nil
	})
	if err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return last, nil
}

// ActivitiesByState walks the state index over the ranges r names, one
// state after another. The cursor is an index key inside r; anything else
// (a corrupt token, or one of a query for another state or type) is an
// *engine.InvalidError rather than a silently empty page.
func (t *tx) ActivitiesByState(r engine.StateRange, after []byte, fn func(*durablev1.ActivityRecord) bool) ([]byte, error) {
	withType := r.ActivityType != ""
	if err := checkPart("activity_type", r.ActivityType); err != nil {
		return nil, err
	}
	states := []durablev1.ActivityState{r.State}
	if r.State == durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED {
		states = states[:0]
		for v := range durablev1.ActivityState_name {
			if s := durablev1.ActivityState(v); s != durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED {
				states = append(states, s)
			}
		}
		slices.Sort(states)
	}
	if after != nil {
		ref, err := decodeActivityStateKey(after)
		if err != nil || !slices.Contains(states, ref.state) || withType && ref.activityType != r.ActivityType {
			return nil, &engine.InvalidError{Field: "next_page_token", Reason: "not a page token of this query"}
		}
	}
	var last []byte
	for _, st := range states {
		prefix := activityStatePrefix(st, r.ActivityType, withType)
		seek := prefix
		switch {
		case after == nil:
		case bytes.HasPrefix(after, prefix):
			seek = after
		case bytes.Compare(after, prefix) > 0:
			continue // the cursor is past this state's range
		}
		more := true
		err := t.eachKey(prefix, seek, func(k []byte) (bool, error) {
			if after != nil && bytes.Equal(k, after) {
				return true, nil
			}
			ref, err := decodeActivityStateKey(k)
			if err != nil {
				return false, err
			}
			a, err := t.indexed(ref.workflowID, ref.activityID, "activity state")
			if err != nil {
				return false, err
			}
			last = bytes.Clone(k)
			more = fn(a)
			return more, nil
		})
		if err != nil {
			return nil, fmt.Errorf("activities by state: %w", err)
		}
		if !more {
			break
		}
	}
	return last, nil
}

// indexed reads the activity an index entry names. The index and the record
// change in one transaction, so a missing record is a bug, not a race: say
// so rather than skip it silently.
func (t *tx) indexed(workflowID, activityID, index string) (*durablev1.ActivityRecord, error) {
	a, err := t.GetActivity(workflowID, activityID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, fmt.Errorf("%s index names a missing activity %s/%s: %w", index, workflowID, activityID, errCorrupt)
	}
	return a, err
}

// RunningWorkflows walks the running index in workflow id order, a page of
// ids at a time, so that fn may wait (see pages).
func (t *tx) RunningWorkflows(fn func(*durablev1.WorkflowRecord) bool) error {
	read := func(item *badgerdb.Item) (string, bool, error) {
		id, err := decodeWorkflowRunningKey(item.Key())
		return id, err == nil, err
	}
	err := pages(t, pageScan{prefix: []byte{prefixWorkflowRunning}}, read, func(id string) (bool, error) {
		w, err := t.indexedWorkflow(id, "running workflow")
		if err != nil {
			return false, err
		}
		return fn(w), nil
	})
	if err != nil {
		return fmt.Errorf("running workflows: %w", err)
	}
	return nil
}

// ClosedWorkflows walks the closed index backwards from its end, the
// newest close, a page at a time so that fn may wait (see pages), and stops
// at the first workflow that closed before since.
func (t *tx) ClosedWorkflows(since time.Time, fn func(*durablev1.WorkflowRecord) bool) error {
	prefix := []byte{prefixWorkflowClosed}
	stop := appendTime(bytes.Clone(prefix), since)
	read := func(item *badgerdb.Item) (string, bool, error) {
		k := item.Key()
		if bytes.Compare(k, stop) < 0 {
			return "", false, nil
		}
		ref, err := decodeWorkflowClosedKey(k)
		return ref.workflowID, err == nil, err
	}
	// A reverse iterator seeks to the last key at or before the seek key:
	// past every close time (none encodes with a leading 0xff), the newest.
	s := pageScan{prefix: prefix, seek: []byte{prefixWorkflowClosed, 0xff}, reverse: true}
	err := pages(t, s, read, func(id string) (bool, error) {
		w, err := t.indexedWorkflow(id, "closed workflow")
		if err != nil {
			return false, err
		}
		return fn(w), nil
	})
	if err != nil {
		return fmt.Errorf("closed workflows: %w", err)
	}
	return nil
}

// indexedWorkflow reads the workflow an index entry names; as in indexed, a
// missing record is corruption, not a race.
func (t *tx) indexedWorkflow(id, index string) (*durablev1.WorkflowRecord, error) {
	w, err := t.GetWorkflow(id)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, fmt.Errorf("%s index names a missing workflow %s: %w", index, id, errCorrupt)
	}
	return w, err
}
