package badger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Key layout. The first byte of every key names its table; everything after it
// is fixed-width big-endian numbers and strings that are either length-prefixed
// (u16) or the last part of the key, so that byte order is value order and no
// id can be a prefix of another id's range.
//
// Notation: u8/u16/u64 are big-endian unsigned integers; i64 is a signed
// integer stored as u64 with its sign bit flipped, so negative values sort
// first; t64 is a time as UTC Unix nanoseconds in a u64 (instants before 1970
// clamp to 0); s16 is a u16 byte length followed by the bytes; "rest" is a
// string that runs to the end of the key.
const (
	// prefixWorkflow: 0x01 | workflow_id:rest → WorkflowRecord.
	// Sorted by workflow id, which ListWorkflows pages over.
	prefixWorkflow byte = 0x01
	// prefixHistory: 0x02 | workflow_id:s16 | event_id:i64 → HistoryEvent.
	prefixHistory byte = 0x02
	// prefixActivity: 0x03 | workflow_id:s16 | activity_id:rest → ActivityRecord.
	prefixActivity byte = 0x03
	// prefixTimer: 0x04 | workflow_id:s16 | timer_id:rest → TimerRecord.
	prefixTimer byte = 0x04
	// prefixActivityID: 0x05 | workflow_id:s16 | activity_id:rest → empty.
	// Every activity id a workflow has scheduled, kept after the activity
	// ends: an id is half of an idempotency key and is never handed out twice.
	prefixActivityID byte = 0x05

	// prefixQueue: 0x10 | kind:u8 | queue:s16 | due:t64 | seq:i64 |
	// workflow_id:s16 | activity_id:rest → empty.
	// One entry per pollable task; a queue is a contiguous range sorted by
	// due time, then seq. The task's reference ends the key, which keeps keys
	// unique even if two records ever carried the same seq.
	prefixQueue byte = 0x10
	// prefixTimerIndex: 0x11 | due:t64 | kind:u8 | workflow_id:s16 | id:rest → empty.
	// Every timer of every kind in one range sorted by due time.
	prefixTimerIndex byte = 0x11
	// prefixDeadLetter: 0x12 | dead_lettered:t64 | workflow_id:s16 |
	// activity_id:rest → empty. Oldest dead letter first; the whole key is
	// the DeadLetters cursor.
	prefixDeadLetter byte = 0x12
	// prefixActivityState: 0x13 | state:u8 | activity_type:s16 |
	// workflow_id:s16 | activity_id:rest → empty.
	// Every pending activity under its state (the ActivityState enum value)
	// and type, so that ListActivities reads the activities of one state, or
	// of one state and type, without a scan of workflows. The whole key is
	// the ActivitiesByState cursor.
	prefixActivityState byte = 0x13
	// prefixWorkflowClosed: 0x14 | close_time:t64 | workflow_id:rest →
	// empty. Every closed workflow under the time it closed, oldest first;
	// a Watch snapshot reads the newest with a reverse iterator and stops
	// at the first one closed before its window, so it never reads the
	// workflows that closed long ago.
	prefixWorkflowClosed byte = 0x14
	// prefixWorkflowRunning: 0x15 | workflow_id:rest → empty. Every running
	// workflow, by id, so that a Watch snapshot reads the running ones
	// without a scan of every workflow.
	prefixWorkflowRunning byte = 0x15

	// prefixLatency: 0x20 | activity_type:rest → LatencyRecord, the type's
	// all-time record: attempts of hours past the stats retention, and the
	// options of its most recently scheduled activity.
	prefixLatency byte = 0x20
	// prefixLatencyHour: 0x21 | activity_type:s16 | hour:t64 → LatencyRecord
	// of the attempts of one type that ended in the hour starting then.
	// One type's hours are a contiguous range, oldest first; a window of
	// hours is read by seeking, in each type's range, to its first hour.
	prefixLatencyHour byte = 0x21
	// keyCounter: 0x30, the whole key → the engine's id sequence as i64
	// (plain big-endian two's complement, 8 bytes).
	prefixCounter byte = 0x30
	// prefixActivityCount: 0x31 | state:u8 | task_queue:rest → how many
	// activity records are in that state on that queue, as i64 (plain
	// big-endian two's complement, 8 bytes, like the counter). PutActivity
	// and DeleteActivity keep it with the records, so the engine starts
	// from these few keys rather than from every record. A count that
	// falls to zero is deleted.
	prefixActivityCount byte = 0x31
	// keyIndexVersion: 0x32, the whole key → u64 (big-endian): the indexes
	// this data directory is known to hold whole. Below indexVersion, Open
	// backfills what is missing (backfill.go) and then writes it, so later
	// starts read none of the records for it.
	prefixIndexVersion byte = 0x32

	// prefixAudit: 0x40 | time:t64 | id:i64 → AuditRecord.
	// Oldest first in key order; the audit log is read newest first with a
	// reverse iterator, and retention deletes from the front. The whole key
	// is the AuditRecords cursor.
	prefixAudit byte = 0x40

	// prefixOperation: 0x50 | seq:i64 → OperationRecord.
	// Operations by the number in their id, which grows with each one
	// started: oldest first in key order, read newest first with a reverse
	// iterator. The whole key is the Operations cursor.
	prefixOperation byte = 0x50
	// prefixOperationItem: 0x51 | seq:i64 | index:i64 → ActivityRef.
	// The work list of one operation: the letters it selected when it
	// started, in the order it releases them.
	prefixOperationItem byte = 0x51

	// prefixPolicyOverride: 0x60 | activity_type:s16 | task_queue:rest →
	// PolicyOverride. The override for every queue of a type (task_queue
	// empty) sorts first in the type's range.
	prefixPolicyOverride byte = 0x60

	// prefixFinished: 0x70 | workflow_id:s16 | activity_id:rest →
	// FinishedActivity. An activity that completed, failed or was pending
	// when its workflow closed, with its attempt trail, kept for the attempt
	// retention; a workflow's are one range.
	prefixFinished byte = 0x70
	// prefixFinishedTime: 0x71 | finished:t64 | workflow_id:s16 |
	// activity_id:rest → empty. The finished activities oldest first, which
	// retention deletes from the front.
	prefixFinishedTime byte = 0x71
)

// maxPartLen bounds every id, queue name and activity type the store keys on.
// It keeps keys well under Badger's key size limit and within a u16 length.
const maxPartLen = 1024

// Bounds on one encoded record. In memory Badger refuses values over 1 MiB;
// on disk large values go to the value log, and a transaction holds about
// 9.6 MiB (15% of the 64 MiB memtable), so an 8 MiB record still fits one.
// The on-disk bound leaves room for a record that carries the daemon's
// default 2 MiB payload limit twice (input and heartbeat details).
const (
	maxRecordSize       = 1 << 20
	maxRecordSizeOnDisk = 8 << 20
)

// errCorrupt reports a key or value that does not decode; it means a bug or corruption.
var errCorrupt = errors.New("malformed key or value")

// checkPart rejects a string too long to be part of a key.
func checkPart(field, s string) error {
	if len(s) > maxPartLen {
		return &engine.InvalidError{Field: field, Reason: fmt.Sprintf("longer than %d bytes", maxPartLen)}
	}
	return nil
}

func appendU64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func appendI64(b []byte, v int64) []byte { return appendU64(b, uint64(v)^(1<<63)) }

// appendTime appends t as UTC Unix nanoseconds. Times before the epoch (such
// as an unset timestamp's zero) clamp to 0 and times past 2262 to the maximum,
// so ordering holds for every input.
func appendTime(b []byte, t time.Time) []byte {
	var n uint64
	switch {
	case t.Before(time.Unix(0, 0)):
		n = 0
	case t.After(time.Unix(0, math.MaxInt64)):
		n = math.MaxInt64
	default:
		n = uint64(t.UnixNano())
	}
	return appendU64(b, n)
}

func appendS16(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func newKey(prefix byte, size int) []byte { return append(make([]byte, 0, 1+size), prefix) }

func workflowKey(id string) []byte { return append(newKey(prefixWorkflow, len(id)), id...) }

// historyPrefix is the range of one workflow's events.
func historyPrefix(workflowID string) []byte {
	return appendS16(newKey(prefixHistory, 2+len(workflowID)+8), workflowID)
}

func historyKey(workflowID string, eventID int64) []byte {
	return appendI64(historyPrefix(workflowID), eventID)
}

// activityPrefix is the range of one workflow's activities.
func activityPrefix(workflowID string) []byte {
	return appendS16(newKey(prefixActivity, 2+len(workflowID)), workflowID)
}

func activityKey(workflowID, activityID string) []byte {
	return append(activityPrefix(workflowID), activityID...)
}

func activityIDKey(workflowID, activityID string) []byte {
	k := appendS16(newKey(prefixActivityID, 2+len(workflowID)+len(activityID)), workflowID)
	return append(k, activityID...)
}

func timerKey(workflowID, timerID string) []byte {
	k := appendS16(newKey(prefixTimer, 2+len(workflowID)+len(timerID)), workflowID)
	return append(k, timerID...)
}

// queuePrefix is the range of one task queue of one kind.
func queuePrefix(kind engine.TaskKind, queue string) []byte {
	k := newKey(prefixQueue, 1+2+len(queue)+16)
	k = append(k, byte(kind))
	return appendS16(k, queue)
}

func queueKey(e engine.QueueEntry) []byte {
	k := queuePrefix(e.Kind, e.Queue)
	k = appendTime(k, e.Due)
	k = appendI64(k, e.Seq)
	k = appendS16(k, e.WorkflowID)
	return append(k, e.ActivityID...)
}

func timerIndexKey(t engine.Timer) []byte {
	k := newKey(prefixTimerIndex, 8+1+2+len(t.WorkflowID)+len(t.ID))
	k = appendTime(k, t.Due)
	k = append(k, byte(t.Kind))
	k = appendS16(k, t.WorkflowID)
	return append(k, t.ID...)
}

func deadLetterKey(deadLettered time.Time, workflowID, activityID string) []byte {
	k := newKey(prefixDeadLetter, 8+2+len(workflowID)+len(activityID))
	k = appendTime(k, deadLettered)
	k = appendS16(k, workflowID)
	return append(k, activityID...)
}

// activityStatePrefix is the range of one state, or with a type, of one
// state and type.
func activityStatePrefix(state durablev1.ActivityState, activityType string, withType bool) []byte {
	k := append(newKey(prefixActivityState, 1+2+len(activityType)), byte(state))
	if withType {
		k = appendS16(k, activityType)
	}
	return k
}

func activityStateKey(state durablev1.ActivityState, activityType, workflowID, activityID string) []byte {
	k := activityStatePrefix(state, activityType, true)
	k = appendS16(k, workflowID)
	return append(k, activityID...)
}

// activityStateRef is what an activity state index key holds.
type activityStateRef struct {
	state        durablev1.ActivityState
	activityType string
	workflowID   string
	activityID   string
}

func decodeActivityStateKey(k []byte) (activityStateRef, error) {
	r := keyReader{b: k}
	r.expect(prefixActivityState)
	var a activityStateRef
	a.state = durablev1.ActivityState(r.u8())
	a.activityType = r.s16()
	a.workflowID = r.s16()
	a.activityID = r.rest()
	if r.err != nil {
		return activityStateRef{}, fmt.Errorf("activity state key %x: %w", k, r.err)
	}
	return a, nil
}

func workflowClosedKey(closed time.Time, workflowID string) []byte {
	k := appendTime(newKey(prefixWorkflowClosed, 8+len(workflowID)), closed)
	return append(k, workflowID...)
}

// workflowClosedRef is what a closed-workflow index key holds.
type workflowClosedRef struct {
	closed     time.Time
	workflowID string
}

func decodeWorkflowClosedKey(k []byte) (workflowClosedRef, error) {
	r := keyReader{b: k}
	r.expect(prefixWorkflowClosed)
	var w workflowClosedRef
	w.closed = r.time()
	w.workflowID = r.rest()
	if r.err != nil {
		return workflowClosedRef{}, fmt.Errorf("closed workflow key %x: %w", k, r.err)
	}
	return w, nil
}

func workflowRunningKey(workflowID string) []byte {
	return append(newKey(prefixWorkflowRunning, len(workflowID)), workflowID...)
}

func decodeWorkflowRunningKey(k []byte) (string, error) {
	r := keyReader{b: k}
	r.expect(prefixWorkflowRunning)
	id := r.rest()
	if r.err != nil {
		return "", fmt.Errorf("running workflow key %x: %w", k, r.err)
	}
	return id, nil
}

// finishedPrefix is the range of one workflow's finished activities.
func finishedPrefix(workflowID string) []byte {
	return appendS16(newKey(prefixFinished, 2+len(workflowID)), workflowID)
}

func finishedKey(workflowID, activityID string) []byte {
	return append(finishedPrefix(workflowID), activityID...)
}

func finishedTimeKey(finished time.Time, workflowID, activityID string) []byte {
	k := newKey(prefixFinishedTime, 8+2+len(workflowID)+len(activityID))
	k = appendTime(k, finished)
	k = appendS16(k, workflowID)
	return append(k, activityID...)
}

// finishedRef is what a finished-time index key holds.
type finishedRef struct {
	finished   time.Time
	workflowID string
	activityID string
}

func decodeFinishedTimeKey(k []byte) (finishedRef, error) {
	r := keyReader{b: k}
	r.expect(prefixFinishedTime)
	var f finishedRef
	f.finished = r.time()
	f.workflowID = r.s16()
	f.activityID = r.rest()
	if r.err != nil {
		return finishedRef{}, fmt.Errorf("finished time key %x: %w", k, r.err)
	}
	return f, nil
}

func latencyKey(activityType string) []byte {
	return append(newKey(prefixLatency, len(activityType)), activityType...)
}

// latencyTypePrefix is the range of one activity type's hourly records.
func latencyTypePrefix(activityType string) []byte {
	return appendS16(newKey(prefixLatencyHour, 2+len(activityType)+8), activityType)
}

func latencyHourKey(activityType string, hour time.Time) []byte {
	return appendTime(latencyTypePrefix(activityType), hour)
}

// latencyTypeEnd sorts after every hourly record of activityType and before
// those of the next type: no hour encodes as eight 0xff bytes.
func latencyTypeEnd(activityType string) []byte {
	return append(latencyTypePrefix(activityType), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
}

func policyOverrideKey(activityType, taskQueue string) []byte {
	k := appendS16(newKey(prefixPolicyOverride, 2+len(activityType)+len(taskQueue)), activityType)
	return append(k, taskQueue...)
}

func counterKey() []byte { return []byte{prefixCounter} }

func activityCountKey(state durablev1.ActivityState, taskQueue string) []byte {
	return append(append(newKey(prefixActivityCount, 1+len(taskQueue)), byte(state)), taskQueue...)
}

func decodeActivityCountKey(k []byte) (durablev1.ActivityState, string, error) {
	r := keyReader{b: k}
	r.expect(prefixActivityCount)
	state := durablev1.ActivityState(r.u8())
	queue := r.rest()
	if r.err != nil {
		return 0, "", fmt.Errorf("activity count key %x: %w", k, r.err)
	}
	return state, queue, nil
}

func indexVersionKey() []byte { return []byte{prefixIndexVersion} }

func auditKey(t time.Time, id int64) []byte {
	return appendI64(appendTime(newKey(prefixAudit, 16), t), id)
}

func operationKey(seq int64) []byte { return appendI64(newKey(prefixOperation, 8), seq) }

// operationItemPrefix is the range of one operation's work list.
func operationItemPrefix(seq int64) []byte { return appendI64(newKey(prefixOperationItem, 16), seq) }

func operationItemKey(seq, index int64) []byte { return appendI64(operationItemPrefix(seq), index) }

// keyReader decodes a key part by part; the first failure sticks in err.
type keyReader struct {
	b   []byte
	err error
}

func (r *keyReader) fail() {
	if r.err == nil {
		r.err = errCorrupt
	}
	r.b = nil
}

func (r *keyReader) u8() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *keyReader) u64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *keyReader) i64() int64 { return int64(r.u64() ^ (1 << 63)) }

func (r *keyReader) time() time.Time { return time.Unix(0, int64(r.u64())).UTC() }

func (r *keyReader) s16() string {
	if len(r.b) < 2 {
		r.fail()
		return ""
	}
	n := int(binary.BigEndian.Uint16(r.b))
	if len(r.b) < 2+n {
		r.fail()
		return ""
	}
	s := string(r.b[2 : 2+n])
	r.b = r.b[2+n:]
	return s
}

func (r *keyReader) rest() string {
	s := string(r.b)
	r.b = nil
	return s
}

// expect consumes the table prefix.
func (r *keyReader) expect(prefix byte) {
	if r.u8() != prefix {
		r.fail()
	}
}

func decodeQueueKey(k []byte) (engine.QueueEntry, error) {
	r := keyReader{b: k}
	r.expect(prefixQueue)
	var e engine.QueueEntry
	e.Kind = engine.TaskKind(r.u8())
	e.Queue = r.s16()
	e.Due = r.time()
	e.Seq = r.i64()
	e.WorkflowID = r.s16()
	e.ActivityID = r.rest()
	if r.err != nil {
		return engine.QueueEntry{}, fmt.Errorf("queue key %x: %w", k, r.err)
	}
	return e, nil
}

func decodeTimerIndexKey(k []byte) (engine.Timer, error) {
	r := keyReader{b: k}
	r.expect(prefixTimerIndex)
	var t engine.Timer
	t.Due = r.time()
	t.Kind = engine.TimerKind(r.u8())
	t.WorkflowID = r.s16()
	t.ID = r.rest()
	if r.err != nil {
		return engine.Timer{}, fmt.Errorf("timer key %x: %w", k, r.err)
	}
	return t, nil
}

// deadLetterRef is what a dead-letter index key holds.
type deadLetterRef struct {
	deadLettered time.Time
	workflowID   string
	activityID   string
}

func decodeDeadLetterKey(k []byte) (deadLetterRef, error) {
	r := keyReader{b: k}
	r.expect(prefixDeadLetter)
	var d deadLetterRef
	d.deadLettered = r.time()
	d.workflowID = r.s16()
	d.activityID = r.rest()
	if r.err != nil {
		return deadLetterRef{}, fmt.Errorf("dead-letter key %x: %w", k, r.err)
	}
	return d, nil
}

// decodeOperationItemKey returns the operation and index an item key names.
func decodeOperationItemKey(k []byte) (seq, index int64, err error) {
	r := keyReader{b: k}
	r.expect(prefixOperationItem)
	seq, index = r.i64(), r.i64()
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	if r.err != nil {
		return 0, 0, fmt.Errorf("operation item key %x: %w", k, r.err)
	}
	return seq, index, nil
}

// latencyHourRef is what an hourly latency key holds.
type latencyHourRef struct {
	activityType string
	hour         time.Time
}

func decodeLatencyHourKey(k []byte) (latencyHourRef, error) {
	r := keyReader{b: k}
	r.expect(prefixLatencyHour)
	var l latencyHourRef
	l.activityType = r.s16()
	l.hour = r.time()
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	if r.err != nil {
		return latencyHourRef{}, fmt.Errorf("latency hour key %x: %w", k, r.err)
	}
	return l, nil
}

func decodePolicyOverrideKey(k []byte) (activityType, taskQueue string, err error) {
	r := keyReader{b: k}
	r.expect(prefixPolicyOverride)
	activityType = r.s16()
	taskQueue = r.rest()
	if r.err != nil {
		return "", "", fmt.Errorf("policy override key %x: %w", k, r.err)
	}
	return activityType, taskQueue, nil
}

func decodeCounter(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("counter value of %d bytes: %w", len(v), errCorrupt)
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

func encodeCounter(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }
