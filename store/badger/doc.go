// Package badger is the engine's Store on Badger v4, an embedded key-value
// store with serializable transactions.
//
// Every record (workflow, history event, activity, timer, latency histogram)
// lives under its own key, protobuf-encoded. Beside the records sit indexes
// whose entries are derived from the records by the engine's QueueEntryOf,
// TimersOf, WorkflowQueueEntryOf, WorkflowTimersOf, UserTimerOf and
// IsDeadLetter: task queues ordered by due time, all timers ordered by due
// time, dead letters ordered by when they were dead-lettered, pending
// activities by state and type, and finished activities (kept with their
// attempt trail for a retention) by when they finished; and the number of
// activities per task queue and state. A write replaces a record and its
// index entries (and moves its counts) in the same transaction, so the
// indexes never disagree with the records, also after a crash. The layout of
// every key is in keys.go.
//
// Commits are not fsynced one by one: Store.Sync makes everything committed
// before it durable and shares each fsync among all callers waiting at the
// time (group commit), which is what lets many writers stay fast.
//
// Badger writes its memtable logs and value log files through memory
// mappings, where a full disk is a SIGBUS rather than an error. space.go
// holds the rule that keeps a reserve free on the data volume and the
// Monitor that watches it; disk.go sizes the reserve from the options in
// force and opens a store read-only when there is no room to open it for
// writing.
package badger
