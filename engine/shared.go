package engine

import "time"

// A shared store is one that several engines use at once, each in a
// durabled process of its own (a node): store/postgres. The store stays the
// one truth; what a node keeps in memory is only what tells it when to look
// at the store again. On a shared store the engine therefore:
//
//   - claims the tasks it hands out from the store's queue index, inside the
//     transaction that leases them, skipping rows another node's transaction
//     holds (ClaimQueued), instead of popping them from its own heaps;
//   - claims the timers it fires the same way (ClaimTimers), so a timer set
//     by a node that died is fired by another, once;
//   - tells the other nodes what each committed transaction queued, closed
//     or changed (Notify, delivered at commit), and hears theirs (Listen): a
//     poll parked on one node wakes for a task scheduled through another,
//     a caller waiting for a workflow to close hears of it whichever node
//     closed it, watchers see every node's changes;
//   - takes its ids from blocks no other node is handed (ReserveIDs).
//
// Every transition is fenced as it is on any store: it reads the record
// inside its transaction and applies only if the record is still in the
// state the transition is for (a queue entry's seq, a timer's due time and
// kind), and a shared store aborts the later of two transactions that
// write one record and runs it again (store/postgres: repeatable read), so
// of two nodes acting on one lease or one timer one commits and the other,
// run again, finds the record moved on and does nothing.

// SharedStore is a Store that several nodes use at once.
type SharedStore interface {
	Store
	// Node is this node's name, unique among the live nodes of the store.
	Node() string
	// Listen calls fn with each notice another node's committed transaction
	// sent, on one goroutine of the store's, in the order they committed.
	// Notices sent while the store could not listen are lost: resync is
	// called once listening works again, and the engine then looks at the
	// store for what it may have missed. stop ends the listening.
	Listen(fn func(Notice), resync func()) (stop func())
	// Nodes returns the nodes that have served the store and are not
	// forgotten yet, by name, with when each was last heard from.
	Nodes() ([]NodeInfo, error)
}

// SharedTx is the transaction of a SharedStore.
type SharedTx interface {
	Tx
	// ClaimQueued returns up to limit entries of one queue due at or before
	// now, earliest due first (then lowest Seq), and holds their rows until
	// the transaction ends; rows another transaction holds are skipped.
	// When it claims none, it also says when the earliest entry due after
	// now is.
	ClaimQueued(kind TaskKind, queue string, now time.Time, limit int) (Claimed, error)
	// ClaimTimers returns up to limit timers due at or before now, earliest
	// first, holding their rows until the transaction ends and skipping rows
	// another transaction holds.
	ClaimTimers(now time.Time, limit int) ([]Timer, error)
	// NextTimer returns the due time of the earliest timer due after now; ok
	// is false when there is none.
	NextTimer(now time.Time) (due time.Time, ok bool, err error)
	// ReserveIDs returns the first of n consecutive ids that no other call,
	// on any node, returns. It is not undone when the transaction is: a
	// transaction run again reserves anew, and ids may be skipped.
	ReserveIDs(n int64) (first int64, err error)
	// Notify sends n to the other nodes when the transaction commits, and
	// never if it does not. A transaction may notify several times.
	Notify(n Notice) error
	// SharePollers replaces what this node has shared of the workers
	// polling it with ps (their Leases are not kept); Pollers returns what
	// the nodes named shared.
	SharePollers(ps []PollerState) error
	Pollers(nodes []string) ([]PollerState, error)
}

// Claimed is what one ClaimQueued found.
type Claimed struct {
	// Entries are the entries claimed, in the queue's order.
	Entries []QueueEntry
	// Next, when no entry was claimed, is the due time of the earliest
	// entry due after now; zero when there is none.
	Next time.Time
}

// Notice is what one committed transaction of a node tells the others.
type Notice struct {
	// Node is the node that committed it (filled in by the store).
	Node string
	// Queued are the queues that got entries, with the earliest due time
	// each got.
	Queued []QueuedNotice
	// Closed are the workflows that closed.
	Closed []string
	// Activities are the activities written or removed, and Workflows the
	// workflows written, for watchers.
	Activities []ActivityKey
	Workflows  []string
	// Overrides says the policy overrides changed.
	Overrides bool
	// Operations says redrive operations were started or changed, and
	// OperationSeqs names them by number, for watchers.
	Operations    bool
	OperationSeqs []int64
	// Audits are the audit records written, for watchers.
	Audits []AuditKey
}

// AuditKey names one audit record: its time and id.
type AuditKey struct {
	Time time.Time
	ID   int64
}

// QueuedNotice names a queue that got entries and the earliest due time
// among them.
type QueuedNotice struct {
	Kind  TaskKind
	Queue string
	Due   time.Time
}

// ActivityKey names one activity.
type ActivityKey struct {
	WorkflowID, ActivityID string
}

// NodeInfo is one node of a shared store as the store knows it.
type NodeInfo struct {
	Name string
	// Started is when the node opened the store; LastSeen when it last said
	// it was alive.
	Started, LastSeen time.Time
}
