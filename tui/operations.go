package tui

import (
	"strconv"
	"strings"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// opsKeep bounds the finished operations held, the oldest dropped first, so
// a console left open for weeks does not grow without end. The Watch
// snapshot sends the running ones and those finished in the last day.
const opsKeep = 1000

// opLog is the operations screen's model: what the Watch stream says of
// the daemon's operations, the snapshot's and every upsert after it.
type opLog struct {
	set *sortedSet[*durablev1.Operation] // opLess: newest first
}

func newOpLog() *opLog {
	return &opLog{set: newSortedSet(opLess)}
}

// opLess puts the newest operation first: the later start, then the larger
// number ("op-10" after "op-9").
func opLess(a, b *durablev1.Operation) bool {
	ta, tb := a.GetStartedTime().AsTime(), b.GetStartedTime().AsTime()
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	na, oka := opNumber(a.GetId())
	nb, okb := opNumber(b.GetId())
	if oka && okb && na != nb {
		return na > nb
	}
	return a.GetId() > b.GetId()
}

// opNumber is the n of "op-n".
func opNumber(id string) (int64, bool) {
	s, ok := strings.CutPrefix(id, "op-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func isRunning(op *durablev1.Operation) bool {
	return op.GetState() == durablev1.OperationState_OPERATION_STATE_RUNNING
}

func isCancelled(op *durablev1.Operation) bool {
	return op.GetState() == durablev1.OperationState_OPERATION_STATE_CANCELLED
}

// opDone is how many of its letters an operation has dealt with: released
// or skipped.
func opDone(op *durablev1.Operation) int64 { return op.GetReleased() + op.GetSkipped() }

// fresherOp picks the later version of one operation. An operation only
// moves forward (it finishes once; its counters only grow), so an answer
// that arrives after a pushed update, or a snapshot taken before it, cannot
// take it back.
func fresherOp(old, next *durablev1.Operation) *durablev1.Operation {
	switch {
	case old == nil:
		return next
	case isRunning(old) != isRunning(next):
		if isRunning(next) {
			return old
		}
		return next
	case opDone(old) != opDone(next):
		if opDone(old) > opDone(next) {
			return old
		}
		return next
	case old.GetReDeadLettered() > next.GetReDeadLettered():
		return old
	}
	return next
}

// get returns the operation with this id.
func (l *opLog) get(id string) (*durablev1.Operation, bool) { return l.set.Get(id) }

// upsert applies operations from the stream or from an answer; each costs a
// binary search and a slice move.
func (l *opLog) upsert(ops []*durablev1.Operation) {
	for _, op := range ops {
		old, _ := l.set.Get(op.GetId())
		l.set.Upsert(op.GetId(), fresherOp(old, op))
	}
	l.trim()
}

// replaceWith loads a snapshot: the operations are those the daemon sent,
// each no older than the version already held.
func (l *opLog) replaceWith(ops []*durablev1.Operation) {
	ids := make([]string, 0, len(ops))
	items := make([]*durablev1.Operation, 0, len(ops))
	seen := make(map[string]int, len(ops))
	for _, op := range ops {
		old, _ := l.set.Get(op.GetId())
		if i, dup := seen[op.GetId()]; dup {
			items[i] = fresherOp(items[i], op)
			continue
		}
		seen[op.GetId()] = len(items)
		ids = append(ids, op.GetId())
		items = append(items, fresherOp(old, op))
	}
	l.set.load(ids, items)
	l.trim()
}

// trim drops the oldest finished operations beyond opsKeep; a running one
// is always kept.
func (l *opLog) trim() {
	for i := l.set.Len() - 1; i >= 0 && l.set.Len() > opsKeep; i-- {
		if op := l.set.At(i); !isRunning(op) {
			l.set.Remove(op.GetId())
		}
	}
}

// running returns the running operations, newest first.
func (l *opLog) running() []*durablev1.Operation {
	var out []*durablev1.Operation
	for i := 0; i < l.set.Len(); i++ {
		if op := l.set.At(i); isRunning(op) {
			out = append(out, op)
		}
	}
	return out
}

// followed returns the newest running operation this console started, or
// nil.
func (m Model) followed() *durablev1.Operation {
	for i := len(m.follow) - 1; i >= 0; i-- {
		if op, ok := m.ops.get(m.follow[i]); ok && isRunning(op) {
			return op
		}
	}
	return nil
}

// follows reports whether the console started the operation id and has not
// seen it finish.
func (m Model) follows(id string) bool {
	for _, f := range m.follow {
		if f == id {
			return true
		}
	}
	return false
}

// upsertOps applies operations pushed on the stream. The one whose progress
// had the status line says how it ended when it does, whoever started it.
func (m Model) upsertOps(ops []*durablev1.Operation) Model {
	shown := m.statusOp()
	m.ops.upsert(ops)
	if shown != nil && !m.follows(shown.GetId()) {
		if op, ok := m.ops.get(shown.GetId()); ok && !isRunning(op) {
			m = m.say(opOutcome(op))
		}
	}
	return m.settle()
}

// settle says how each followed operation that has finished ended, and stops
// following it. An operation the daemon no longer knows (a new data
// directory behind the same address) is dropped with a word.
func (m Model) settle() Model {
	keep := m.follow[:0:0]
	for _, id := range m.follow {
		op, ok := m.ops.get(id)
		switch {
		case !ok && m.conn.synced:
			m = m.warn(id + " is no longer known to the daemon")
		case ok && !isRunning(op):
			m = m.sayOutcome(op)
		default:
			keep = append(keep, id)
		}
	}
	m.follow = keep
	return m
}

// StillRunning returns the operations this console started that were running
// when it last heard from the daemon, oldest first. They go on after the
// console quits: the daemon runs them.
func (m Model) StillRunning() []*durablev1.Operation {
	var out []*durablev1.Operation
	for _, id := range m.follow {
		if op, ok := m.ops.get(id); ok && isRunning(op) {
			out = append(out, op)
		}
	}
	return out
}
