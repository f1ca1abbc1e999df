package engine

import (
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// While a watcher's snapshot streams, the changes published after its view
// do not queue in its buffer event by event, as they do once it is live:
// they gather in the engine's catch-up log, one entry per record changed,
// holding that record's last state. When the snapshot is done, the watcher
// takes the entries changed since its view, sends them after SNAPSHOT_DONE
// as UPSERT and REMOVE events in the order of their last changes, and from
// then on gets every event in its buffer, as before.
//
// That is enough because every change a watcher hears of carries the whole
// of what it changed, and a consumer keeps only the last: an activity's
// PendingActivity or its removal, a workflow's WorkflowInfo, an operation,
// an audit record and a policy override (set or Cleared) by their keys, the
// gate's WritesState and the task queue list whole. A record changed a
// thousand times while a snapshot of a million activities streams costs one
// entry, not a thousand events: a snapshot may take as long as it takes on
// a busy daemon, where a buffer of events would overflow (about eleven
// seconds at 370 events a second) and cut its watcher off after every
// snapshot.
//
// The log is one for all watchers: an entry's state is shared, and each
// catching watcher only remembers where its view stands in the log (from).
// What it holds is bounded by its cost, catchUpBudget in all, however many
// watchers catch up: an entry costs what its state takes to encode, times
// catchUpHeapFactor for what the decoded message takes on the heap, plus
// catchUpEntryCost. A log over budget cuts off the watcher whose view is
// oldest (it ends with ErrWatchLagged after its SNAPSHOT_DONE, as a lagging
// watcher does) and forgets what only that watcher needed; a watcher alone
// whose changes outgrow the budget is cut off likewise. The entries older
// than every catching watcher's view are dropped as each watcher leaves.

// catchUpBudget is what the catch-up log may cost (see above): some 48,000
// activities waiting on a retry after a failure (1.4 kB each on the heap,
// state included), or 200,000 removed (320 bytes each), which at 10,000
// activities a second is a snapshot of 20 s. It is what consoles opening on
// a busy daemon may add to the daemon's memory at most, however many open
// at once.
const catchUpBudget = 64 << 20

// catchUpEntryCost is what an entry takes besides its state: the map slot,
// the key (whose strings are the state's), the entry and its links.
// catchUpHeapFactor turns a state's encoded size into what the decoded
// message takes on the heap. Both are measured by BenchmarkCatchUpEntry.
const (
	catchUpEntryCost  = 200
	catchUpHeapFactor = 5
)

// catchKind is the kind of record a catch-up entry holds.
type catchKind uint8

const (
	catchActivity catchKind = iota
	catchWorkflow
	catchOperation
	catchAudit
	catchOverride
	catchWrites
	catchQueues
)

// catchKey names a record: a, b and n as its kind needs them (activity:
// workflow and activity id; workflow and operation: the id; audit: the id
// in n; override: activity type and task queue).
type catchKey struct {
	kind catchKind
	a, b string
	n    int64
}

// catchEntry is one record's last state. An activity removed holds its
// *ActivityRef.
type catchEntry struct {
	key        catchKey
	state      proto.Message
	removed    bool
	seq        uint64 // of the send that set state
	cost       int
	prev, next *catchEntry // by seq, oldest first
}

// catchUp is the catch-up log (see above); guarded by the engine's mu.
type catchUp struct {
	budget int
	// seq numbers the sends folded in; a watcher's from is the seq at its
	// view, and it needs the entries of a larger seq.
	seq            uint64
	entries        map[catchKey]*catchEntry
	oldest, newest *catchEntry
	cost           int
	watchers       map[*watcher]struct{}
}

// join starts w catching up from now.
func (c *catchUp) join(w *watcher) {
	if c.watchers == nil {
		c.watchers = map[*watcher]struct{}{}
		c.entries = map[catchKey]*catchEntry{}
	}
	c.watchers[w] = struct{}{}
	w.catching, w.from = true, c.seq
}

// catching reports whether any watcher catches up.
func (c *catchUp) catching() bool { return len(c.watchers) > 0 }

// fold notes what events changed, as one send.
func (c *catchUp) fold(events []*durablev1.WatchEvent) {
	c.seq++
	for _, ev := range events {
		for _, a := range ev.GetActivities() {
			c.put(catchKey{kind: catchActivity, a: a.GetWorkflowId(), b: a.GetActivityId()}, a, false)
		}
		for _, r := range ev.GetRemoved() {
			c.put(catchKey{kind: catchActivity, a: r.GetWorkflowId(), b: r.GetActivityId()}, r, true)
		}
		for _, w := range ev.GetWorkflows() {
			c.put(catchKey{kind: catchWorkflow, a: w.GetWorkflowId()}, w, false)
		}
		for _, op := range ev.GetOperations() {
			c.put(catchKey{kind: catchOperation, a: op.GetId()}, op, false)
		}
		for _, r := range ev.GetAuditRecords() {
			c.put(catchKey{kind: catchAudit, n: r.GetId()}, r, false)
		}
		for _, o := range ev.GetPolicyOverrides() {
			c.put(catchKey{kind: catchOverride, a: o.GetActivityType(), b: o.GetTaskQueue()}, o, false)
		}
		if w := ev.GetWrites(); w != nil {
			c.put(catchKey{kind: catchWrites}, w, false)
		}
		if q := ev.GetTaskQueues(); q != nil {
			c.put(catchKey{kind: catchQueues}, q, false)
		}
	}
}

// put makes state the last of k, as of the current send.
func (c *catchUp) put(k catchKey, state proto.Message, removed bool) {
	en := c.entries[k]
	if en == nil {
		en = &catchEntry{key: k}
		c.entries[k] = en
	} else {
		c.unlink(en)
		c.cost -= en.cost
	}
	en.state, en.removed, en.seq = state, removed, c.seq
	en.cost = catchUpEntryCost + catchUpHeapFactor*proto.Size(state)
	c.cost += en.cost
	en.prev, en.next = c.newest, nil
	if c.newest != nil {
		c.newest.next = en
	} else {
		c.oldest = en
	}
	c.newest = en
}

func (c *catchUp) unlink(en *catchEntry) {
	if en.prev != nil {
		en.prev.next = en.next
	} else {
		c.oldest = en.next
	}
	if en.next != nil {
		en.next.prev = en.prev
	} else {
		c.newest = en.prev
	}
	en.prev, en.next = nil, nil
}

// over reports whether the log costs more than its budget.
func (c *catchUp) over() bool { return c.cost > c.budget }

// oldestWatcher is the catching watcher whose view is oldest.
func (c *catchUp) oldestWatcher() *watcher {
	var old *watcher
	for w := range c.watchers {
		if old == nil || w.from < old.from {
			old = w
		}
	}
	return old
}

// caughtState is a record's last state, as a watcher takes it from the log.
type caughtState struct {
	state   proto.Message
	removed bool
}

// since returns, oldest first, the states of the records changed after
// from: copies, since the entries change with later sends.
func (c *catchUp) since(from uint64) []caughtState {
	n := 0
	for en := c.newest; en != nil && en.seq > from; en = en.prev {
		n++
	}
	out := make([]caughtState, 0, n)
	for en := c.newest; en != nil && en.seq > from; en = en.prev {
		out = append(out, caughtState{en.state, en.removed})
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// leave ends w's catching up and drops the entries no watcher needs now.
func (c *catchUp) leave(w *watcher) {
	if !w.catching {
		return
	}
	w.catching = false
	delete(c.watchers, w)
	if len(c.watchers) == 0 {
		// Keep seq: a from is compared with the seq of later sends only.
		c.entries, c.oldest, c.newest, c.cost, c.watchers = nil, nil, nil, 0, nil
		return
	}
	from := c.oldestWatcher().from
	for c.oldest != nil && c.oldest.seq <= from {
		en := c.oldest
		c.unlink(en)
		delete(c.entries, en.key)
		c.cost -= en.cost
	}
}

// catchUpEvents turns the states into the events that bring a watcher from
// its snapshot to now, in the order of the records' last changes (oldest
// first): a run of upserts makes UPSERT events, a run of removals REMOVE
// events, at most snapshotChunk items to an event. In that order a reader
// that sees a change has seen every change made before it, as it has once
// live: a client that waits to see its own last change sees the store as of
// then, and not, say, an activity it completed before that change still
// pending because the removals came last. What that order costs is an
// event for each switch between the two kinds, so at most one per entry.
// The states are shared with other watchers and must not change.
func catchUpEvents(entries []caughtState, now *timestamppb.Timestamp) []*durablev1.WatchEvent {
	var events []*durablev1.WatchEvent
	// last is the event to add to, if it is of kind and has room.
	last := func(kind durablev1.WatchEventKind) *durablev1.WatchEvent {
		if n := len(events); n > 0 {
			ev := events[n-1]
			items := len(ev.Activities) + len(ev.Workflows) + len(ev.Operations) + len(ev.AuditRecords) + len(ev.PolicyOverrides) + len(ev.Removed)
			if ev.Kind == kind && items < snapshotChunk {
				return ev
			}
		}
		ev := &durablev1.WatchEvent{Kind: kind, ServerTime: now}
		events = append(events, ev)
		return ev
	}
	up := func() *durablev1.WatchEvent { return last(durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT) }
	for _, en := range entries {
		if en.removed {
			ev := last(durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE)
			ev.Removed = append(ev.Removed, en.state.(*durablev1.ActivityRef))
			continue
		}
		switch s := en.state.(type) {
		case *durablev1.PendingActivity:
			ev := up()
			ev.Activities = append(ev.Activities, s)
		case *durablev1.WorkflowInfo:
			ev := up()
			ev.Workflows = append(ev.Workflows, s)
		case *durablev1.Operation:
			ev := up()
			ev.Operations = append(ev.Operations, s)
		case *durablev1.AuditRecord:
			ev := up()
			ev.AuditRecords = append(ev.AuditRecords, s)
		case *durablev1.PolicyOverride:
			ev := up()
			ev.PolicyOverrides = append(ev.PolicyOverrides, s)
		case *durablev1.WritesState:
			up().Writes = s
		case *durablev1.TaskQueueList:
			up().TaskQueues = s
		}
	}
	return events
}
