// Package postgres is the engine's Store on PostgreSQL, through pgx: the
// store for running durabled on a database that several nodes share.
//
// The schema is in migrations/, embedded in the binary and applied by Open
// (schema_migrations holds the versions applied). Every record is a row
// holding it whole, protobuf-encoded, beside the columns the store queries
// on: activities carry their state, type, queue and dead-lettered time,
// which partial indexes turn into the state and dead-letter lists;
// workflows carry whether they run and when they closed. Task queue entries
// and timers are rows of their own, derived from the records by the
// engine's QueueEntryOf, TimersOf, WorkflowQueueEntryOf, WorkflowTimersOf
// and UserTimerOf, and written in the same transaction as the record. Every list returns what the Badger store
// returns, in the same order, so the engine's contract does not depend on
// the store: store/storetest checks both.
//
// Update runs repeatable-read transactions and runs fn again when
// PostgreSQL aborts one for a conflict (see Update for why that isolation
// fences every transition); a commit is durable when it returns, so Sync
// has nothing left to do.
//
// A transaction costs round trips, not statements: it keeps the records it
// read or wrote and answers a second read of one from memory (cache.go),
// and its writes, its begin and its commit wait to travel with its next
// read or its end (pipe.go), the waiting writes of each table merged into
// one multi-row statement (merge.go). A claim reads the records of what it claims
// in its own statement (shared.go), and Prefetch reads the records a batch
// of transitions says it will read, all in one round trip, before they run
// (prefetch.go). Each statement is planned once per connection, for any
// arguments, and the plan kept (planCacheMode in store.go).
//
// Any number of nodes (durabled processes) may share a database: the Store
// is an engine.SharedStore. Each opens it under a name of its own,
// registered in the nodes table and kept alive by a heartbeat (AliveWithin).
// No row is written by every transaction of every node: the activity
// counts are rows per node and slot, summed when read, and the hourly
// latency records rows per node, merged when read (latency.go); ids come
// from a sequence in blocks (ReserveIDs). Queue entries and timers are
// claimed with FOR UPDATE SKIP LOCKED (shared.go). Notices travel by
// LISTEN/NOTIFY on one channel (notice.go for the encoding, listen.go for
// the listener).
package postgres
