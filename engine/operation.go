package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// An operation is work the daemon does on an operator's behalf at its own
// pace: a redrive of many dead letters. The rules of one live here as pure
// functions of the record and the time: its id, how many letters are due by
// a time (the pacing), what one release does to its counters, and the
// cancel. operation_run.go is the runtime around them: the start, the
// goroutine that releases, resume after a restart, describe, list, cancel.
//
// The durable shape: the record (0x50) says where the operation stands, and
// its work list (0x51) holds the letters it selected when it started, in
// release order. Every release transaction checks that the operation still
// runs, releases the next items, advances the cursor and the counters and
// the audit record, all in one transaction: a letter is released once, and a
// restart continues from the cursor.

// DefaultRedriveRate is how many letters per second a redrive operation
// releases when the request does not say.
const DefaultRedriveRate = 50

const (
	opRunning   = durablev1.OperationState_OPERATION_STATE_RUNNING
	opCompleted = durablev1.OperationState_OPERATION_STATE_COMPLETED
	opCancelled = durablev1.OperationState_OPERATION_STATE_CANCELLED
	// opPreparing is an operation whose work list is still being written;
	// it was never acknowledged and no reader sees it.
	opPreparing = durablev1.OperationState_OPERATION_STATE_UNSPECIFIED

	// opKindRedrive is Operation.kind of a redrive operation.
	opKindRedrive = "redrive"
)

// OperationID is the id of operation number seq.
func OperationID(seq int64) string { return "op-" + strconv.FormatInt(seq, 10) }

// operationSeq returns the number in an operation id, and false for any
// string OperationID does not return.
func operationSeq(id string) (int64, bool) {
	s, ok := strings.CutPrefix(id, "op-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || OperationID(n) != id {
		return 0, false
	}
	return n, true
}

// pace is how an operation releases its work list: at origin base items
// were done (released or skipped); from then on item base+k is due
// k/rate seconds after origin. The origin is the start, or the engine's
// start when a restart resumes it, so a daemon that was down does not
// release the letters it missed as one herd.
type pace struct {
	origin time.Time
	base   int64
	rate   float64
	// total is the length of the work list.
	total int64
}

// due is how many items may be done by now: base, plus one at the origin,
// plus one every 1/rate seconds after it, never more than total. The
// tolerance of a millionth of an item keeps float rounding from holding an
// item back at the instant at names for it.
func (p pace) due(now time.Time) int64 {
	if now.Before(p.origin) {
		return min(p.base, p.total)
	}
	n := p.base + 1 + int64(math.Floor(now.Sub(p.origin).Seconds()*p.rate+1e-6))
	return min(n, p.total)
}

// at is when item i (i >= base) becomes due, rounded up to the nanosecond
// so that due(at(i)) counts it.
func (p pace) at(i int64) time.Time {
	if i <= p.base {
		return p.origin
	}
	return p.origin.Add(time.Duration(math.Ceil(float64(i-p.base) / p.rate * float64(time.Second))))
}

// releaseOutcome is what became of one work item.
type releaseOutcome int

const (
	// released: the letter went back to its queue.
	released releaseOutcome = iota + 1
	// skipped: the letter was no longer dead-lettered (redriven by someone
	// else, or its workflow gone).
	skipped
)

// advance records the outcome of the operation's next work item: the
// cursor moves on, the counters follow, and the operation completes with
// its last item.
func advance(r *durablev1.OperationRecord, out releaseOutcome, now time.Time) {
	op := r.GetOperation()
	switch out {
	case released:
		op.Released++
	case skipped:
		op.Skipped++
	}
	r.Next++
	op.Left = op.GetMatched() - r.GetNext()
	if r.GetNext() >= op.GetMatched() {
		op.State = opCompleted
		op.FinishedTime = ts(now)
	}
}

// cancel stops a running operation: what it released stays released, the
// rest of its work list stays where it is, and no later release of it can
// commit (every release checks the state in its own transaction).
func cancel(r *durablev1.OperationRecord, by Actor, reason string, now time.Time) error {
	op := r.GetOperation()
	switch op.GetState() {
	case opRunning:
	case opPreparing:
		return fmt.Errorf("operation %s: %w", op.GetId(), ErrNotFound)
	default:
		return fmt.Errorf("operation %s is %s: %w", op.GetId(), stateWord(op.GetState()), ErrOperationFinished)
	}
	op.State = opCancelled
	op.FinishedTime = ts(now)
	op.CancelledBy = by.Principal
	op.CancelReason = reason
	op.Left = op.GetMatched() - r.GetNext()
	return nil
}

// stateWord is an operation state the way messages say it.
func stateWord(s durablev1.OperationState) string {
	switch s {
	case opRunning:
		return "running"
	case opCompleted:
		return "completed"
	case opCancelled:
		return "cancelled"
	}
	return "preparing"
}
