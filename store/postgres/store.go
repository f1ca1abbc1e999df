package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// maxAttempts bounds how often Update runs fn when PostgreSQL aborts the
// transaction for a serialization failure or a deadlock.
const maxAttempts = 20

// A transaction that lost a conflict waits before it runs again, under the
// retry rule of activities (activity.Backoff with full jitter): a random
// time below 2 ms doubled per attempt, at most 100 ms. Nodes whose batches touch the same hot workflows
// otherwise run again in step and keep colliding: three nodes completing
// activities of the same workflows exhausted ten immediate re-runs in two
// of two benchmark rounds. Waiting all twenty attempts at the cap would
// take under two seconds, well inside a workflow task's lease.
var conflictRetry = &durablev1.RetryPolicy{InitialMs: 2, Backoff: 2, MaxIntervalMs: 100}

// conflictBackoff is how long Update waits after the attempt-th run (from
// 1) of a transaction lost a conflict; jitter draws uniformly from [0, d).
func conflictBackoff(attempt int, jitter func(d time.Duration) time.Duration) time.Duration {
	return jitter(activity.Backoff(conflictRetry, attempt))
}

// fullJitter draws uniformly from [0, d).
func fullJitter(d time.Duration) time.Duration {
	return activity.Jitter(d, rand.Float64())
}

// Options configure a Store.
type Options struct {
	// MaxConns bounds the connections to the database (0: pgx's default,
	// the larger of 4 and the number of CPUs). The heartbeat and each
	// Listen use a connection of their own besides.
	MaxConns int32
	// Node names this node among those sharing the database: at most
	// maxNodeName bytes of UTF-8 without control characters. Empty picks a
	// name no other node has ("node-" and 16 random hex digits). Open
	// refuses a name another node said it was alive under within
	// AliveWithin.
	Node string

	// tracer sees every statement of the pool's connections (the tests
	// read the statements the store runs).
	tracer pgx.QueryTracer
}

// planCacheMode is the plan_cache_mode of the store's connections, unless
// the DSN sets one: every statement is planned once per connection and its
// plan reused. By default PostgreSQL plans a prepared statement for its
// arguments at each of its first five runs on a connection, and at every
// run after that whenever the plan for the arguments looks cheaper than the
// plan for any: the merged delete of queue entries (eight rows, fewer than
// the ten the planner guesses for an array parameter) and the read of a
// batch's workflows were planned at every run. In the throughput benchmark
// the database spent 130–200 µs of CPU per activity planning, about 60 of
// them on those two, and 14–24 µs after. The store's statements look rows
// up by their keys through indexes whatever the arguments, and
// TestStatements_PlannedForAnyArgumentsUseIndexes checks that each plan
// made for any arguments does.
const planCacheMode = "force_generic_plan"

// plannerSettings are set on the store's connections, each unless the DSN
// sets it. A connection keeps the plan it makes at a statement's first run
// (planCacheMode), and the planner makes it for the size the tables have at
// that moment, which for these tables says nothing about later: the
// activities, queue and timers of a quiet deployment empty out, autovacuum
// records them empty, and every plan made then (PostgreSQL makes them again
// whenever a table's statistics change) read its table whole, even the
// read of one activity by its key, until the next autoanalyze after the
// table grew back. Every statement of the store finds its rows through an
// index, or reads a table that stays small (the counts, the nodes, the
// latency hours); with sequential scans, hash joins and merge joins turned
// off the planner takes the index paths whatever it believes of the sizes,
// and takes the others only where no index path exists.
// TestStatements_PlannedForAnyArgumentsUseIndexes plans every statement on
// empty tables, analyzed or not, and checks the plans kept.
//
// Turning a plan method off adds a huge cost to it rather than removing it,
// and a plan that costly crosses jit_above_cost: PostgreSQL then compiled
// the read of the activity counts (a seq scan of a few rows, the only path)
// at each run, 170 ms of JIT for a statement that runs in 0.1 ms. The
// store's statements are short lookups that JIT never pays for, so it is
// off.
var plannerSettings = map[string]string{
	"plan_cache_mode":  planCacheMode,
	"enable_seqscan":   "off",
	"enable_hashjoin":  "off",
	"enable_mergejoin": "off",
	"jit":              "off",
}

// Store is an engine.Store on PostgreSQL. It is safe for concurrent use, and
// any number of Stores, in any number of processes, may share one database.
type Store struct {
	pool     *pgxpool.Pool
	conn     *pgx.ConnConfig // for the connections outside the pool
	closed   atomic.Bool
	once     sync.Once
	pageSize int // rows a list reads per query

	node        string
	incarnation int64 // this opening of the name, in every notice it sends
	heartbeat   *heartbeat

	// slots holds the slots of the activity counts no transaction holds:
	// as many as the pool has connections (see queueCounts).
	slots chan int16

	mu        sync.Mutex
	listeners map[*listener]struct{} // stopped by Close

	trips atomic.Int64 // round trips of Update and View (RoundTrips)
	// statements counts the statements of those round trips, begins and
	// ends included (the tests read it).
	statements atomic.Int64
}

var (
	_ engine.SharedStore = (*Store)(nil)
	_ engine.SharedTx    = (*tx)(nil)
)

// Open connects to the database dsn names (a PostgreSQL URL or key=value
// string), brings its schema to this binary's version, registers the node
// and starts its heartbeat, and returns the store. A name another node was
// seen alive under within AliveWithin is a *NodeNameError.
func Open(dsn string, opts Options) (*Store, error) {
	node := opts.Node
	if node == "" {
		node = "node-" + randomHex(8)
	}
	if err := checkNodeName(node); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres dsn: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	for name, value := range plannerSettings {
		if _, set := cfg.ConnConfig.RuntimeParams[name]; !set {
			cfg.ConnConfig.RuntimeParams[name] = value
		}
	}
	if opts.tracer != nil {
		cfg.ConnConfig.Tracer = opts.tracer
	}
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	s := &Store{
		pool: pool, conn: cfg.ConnConfig.Copy(), pageSize: defaultPageSize,
		node: node, incarnation: randomInt63(), listeners: map[*listener]struct{}{},
		slots: make(chan int16, pool.Config().MaxConns),
	}
	for i := range cap(s.slots) {
		s.slots <- int16(i)
	}
	if err := s.register(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.heartbeat = startHeartbeat(s)
	return s, nil
}

// Update runs fn in one repeatable-read transaction and commits it when fn
// returns nil. When PostgreSQL aborts it for a conflict with a concurrent
// transaction, fn runs again on fresh data, up to a bounded number of
// attempts; fn must therefore have no effects outside the transaction that a
// re-run would repeat. A commit is durable when Update returns.
//
// Repeatable read is what fences the engine's transitions: each one writes
// the record whose state it checked, and of two transactions that write one
// row, the later is aborted (40001) and run again, when it finds the record
// moved on. Serializable would also catch two transactions that each check
// a record the other writes without writing it; no transition does that,
// and serializable's cost was measured too high for many nodes: its
// predicate locks cover whole index pages, so leases of neighbouring
// activities conflicted, and with eight pollers on two nodes a lease ran
// 3.7 times on average and a quarter failed after maxAttempts, against
// 0.04–0.09 runs again and none failed under repeatable read
// (BenchmarkSharedLease).
func (s *Store) Update(fn func(engine.Tx) error) error {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	ctx := context.Background()
	slot := <-s.slots
	defer func() { s.slots <- slot }()
	var err error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		// A tx per attempt: the notices of an attempt that rolled back go
		// with it.
		err = s.attempt(ctx, false, slot, fn)
		if !retryable(err) {
			return s.mapErr(err)
		}
		if attempt < maxAttempts {
			time.Sleep(conflictBackoff(attempt, fullJitter))
		}
	}
	return fmt.Errorf("transaction conflicted %d times: %w", maxAttempts, err)
}

// View runs fn in a read-only transaction that sees one consistent snapshot.
func (s *Store) View(fn func(engine.Tx) error) error {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	return s.mapErr(s.attempt(context.Background(), true, 0, fn))
}

// The statements that begin a transaction: its begin goes with its first
// statement (pipe.go).
const (
	beginSQL         = "BEGIN ISOLATION LEVEL REPEATABLE READ"
	beginReadOnlySQL = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
)

// attempt runs fn in one transaction on a connection of the pool. A
// writing one commits with its last round trip (tx.finish), a read-only
// one in a round trip of its own; one that failed is rolled back. The attempt's error is the first
// the server gave it, if any (firstFailure).
func (s *Store) attempt(ctx context.Context, readOnly bool, slot int16, fn func(engine.Tx) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection left inside a transaction (a panic, a connection
	// lost) is closed by the pool, not reused.
	defer conn.Release()
	f := &firstFailure{q: conn}
	p := &pipe{q: f, begin: beginSQL, trips: &s.trips, stmts: &s.statements}
	if readOnly {
		p.begin = beginReadOnlySQL
	}
	t := &tx{ctx: ctx, q: p, p: p, readOnly: readOnly, pageSize: s.pageSize, s: s, slot: slot}
	err = fn(t)
	if err == nil && !readOnly {
		err = t.finish()
	}
	if conn.Conn().PgConn().TxStatus() != 'I' {
		// Begun and not committed: a read-only transaction, which
		// commits (the database's count of rollbacks stays a count of
		// failures), or a failure, or a commit that never ran behind
		// one. Should the statement fail, the connection is broken, and
		// the pool closes it.
		end := "ROLLBACK"
		if err == nil && f.err == nil {
			end = "COMMIT"
		}
		p.trip(1)
		if _, cerr := conn.Exec(ctx, end); cerr != nil && err == nil && f.err == nil {
			err = cerr
		}
	}
	if f.err != nil {
		// The transaction died with its first failure; what followed it
		// says only that.
		return f.err
	}
	return err
}

// RoundTrips returns how many round trips to the database the store's
// transactions (Update and View, with their begins and ends) have made
// since it opened: a measure of what a transaction costs that the load of
// the machine does not move.
func (s *Store) RoundTrips() int64 {
	return s.trips.Load()
}

// Sync returns at once: PostgreSQL makes a transaction durable before its
// commit returns (synchronous_commit on), so every committed transaction is
// already on disk.
func (s *Store) Sync() error {
	if s.closed.Load() {
		return engine.ErrClosed
	}
	return nil
}

// Close stops the listeners and the heartbeat, tells the other nodes the
// name is free (see release), and closes the connections. Later calls do
// nothing.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.closed.Store(true)
		s.mu.Lock()
		ls := make([]*listener, 0, len(s.listeners))
		for l := range s.listeners {
			ls = append(ls, l)
		}
		s.mu.Unlock()
		for _, l := range ls {
			l.stop()
		}
		s.heartbeat.stop()
		s.release()
		s.pool.Close()
	})
	return nil
}

// retryable reports whether PostgreSQL aborted a transaction that would
// succeed if run again: a serialization failure or a deadlock.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// mapErr turns the errors of a closed pool into engine.ErrClosed.
func (s *Store) mapErr(err error) error {
	if err != nil && s.closed.Load() && !errors.Is(err, engine.ErrClosed) {
		return fmt.Errorf("%w: %w", engine.ErrClosed, err)
	}
	return err
}
