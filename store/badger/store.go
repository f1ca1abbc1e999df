package badger

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tinyllm/durable/engine"
)

// Options tune how the store opens Badger.
type Options struct {
	// InMemory keeps everything in memory (unit tests); Dir is ignored.
	InMemory bool
	// NoSync relaxes durability: Sync returns without fsync. A commit then
	// survives a crash of the process (the operating system still holds it)
	// but not a crash of the machine. Off by default.
	NoSync bool
	// Logger receives Badger's own warnings and errors, and what a start
	// did once to bring an older data directory up to date; nil discards
	// them.
	Logger *slog.Logger
	// Memory is how the store spends memory (see MemoryFor); the zero
	// value means MemoryFor(DefaultMemoryBudget). An in-memory store
	// ignores it.
	Memory Memory
	// WroteFunc, when set, hears after each commit how many bytes of
	// records it wrote (keys and values, before Badger's own overhead), so
	// that a watcher of free space can look again before a burst of writes
	// takes the reserve (Monitor.Wrote).
	WroteFunc func(bytes int)
	// ReadOnly opens the store without writing to it: Badger creates no
	// memtable and no value log file, which a volume without free space
	// could not back (see OpenReadOnly). Update then fails with
	// engine.ErrWritesRefused.
	ReadOnly bool
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// memory is o.Memory, or the default budget's when it is the zero value.
func (o Options) memory() Memory {
	if o.Memory == (Memory{}) {
		mem, _ := MemoryFor(DefaultMemoryBudget)
		return mem
	}
	return o.Memory
}

// maxConflictAttempts bounds how often Update re-runs a transaction that lost
// a conflict to a concurrent one before it gives up with the conflict error.
const maxConflictAttempts = 10

// Store is an engine.Store on Badger. Commits are written without fsync; Sync
// makes them durable, sharing one fsync among all callers waiting at the time
// (group commit). It is safe for concurrent use.
type Store struct {
	db       *badgerdb.DB
	dir      string
	readOnly bool
	wrote    func(bytes int) // Options.WroteFunc
	sync     *groupSync      // nil when Sync is a no-op
	logs     *logSync        // what sync runs; nil when it runs DB.Sync
	// maxRecord bounds one encoded record (see maxRecordSize).
	maxRecord int
	// recent holds records the last read-write transactions read and
	// wrote (recent.go).
	recent *recentRecords

	// stopPageOut stops the page-out of the mapped logs; stopGC closes
	// to stop the value-log garbage collection, which closes gcDone.
	stopPageOut func()
	stopGC      chan struct{}
	gcDone      chan struct{}

	closeOnce sync.Once
	closeErr  error
}

var _ engine.Store = (*Store)(nil)

// Open opens (or creates) the store in dir and recovers whatever it holds.
// With opts.InMemory, dir is ignored and nothing touches the disk.
func Open(dir string, opts Options) (*Store, error) {
	bo := badgerOptions(dir, opts)
	var db *badgerdb.DB
	var err error
	if opts.ReadOnly && !opts.InMemory {
		db, err = openReadOnly(bo)
	} else {
		db, err = badgerdb.Open(bo)
	}
	if err != nil {
		return nil, fmt.Errorf("open badger store: %w", mapErr(err))
	}
	s := &Store{db: db, dir: dir, maxRecord: maxRecordSizeOnDisk, readOnly: opts.ReadOnly, wrote: opts.WroteFunc, recent: newRecentRecords()}
	if opts.InMemory {
		s.maxRecord = maxRecordSize
	}
	if !opts.InMemory && !opts.NoSync && !opts.ReadOnly {
		logs, err := newLogSync(dir)
		if err != nil {
			opts.logger().Warn("syncing through Badger's DB.Sync", "reason", err)
			s.sync = newGroupSync(db.Sync)
		} else {
			s.logs = logs
			s.sync = newGroupSync(logs.sync)
		}
	}
	// Read-only, activities without their state index entry stay out of
	// ListActivities, and workflows without their running or closed index
	// entry out of a Watch snapshot, until a read-write start adds them.
	if !opts.ReadOnly {
		if err := s.backfillIndexes(opts.logger()); err != nil {
			db.Close()
			return nil, err
		}
	}
	if opts.InMemory {
		return s, nil
	}
	// The kernel names mapped files by their resolved path.
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("resolve data directory: %w", err)
	}
	s.stopPageOut = startPageOut(abs, opts.memory().MappedLogs, opts.logger())
	s.stopGC, s.gcDone = make(chan struct{}), make(chan struct{})
	if opts.ReadOnly {
		close(s.gcDone) // nothing is written, so nothing becomes garbage
	} else {
		go collectValueLog(db, opts.logger(), s.stopGC, s.gcDone, s.markVlog)
	}
	return s, nil
}

// Update runs fn in one read-write transaction and commits it when fn returns
// nil. When the commit conflicts with a concurrent transaction, fn runs again
// on fresh data, up to a bounded number of attempts; fn must therefore have
// no effects outside the transaction that a re-run would repeat. A
// transaction larger than Badger allows fails with badger's ErrTxnTooBig.
func (s *Store) Update(fn func(engine.Tx) error) error {
	if s.readOnly {
		return errReadOnly
	}
	var err error
	for range maxConflictAttempts {
		var t *tx
		err = s.update(func(txn *badgerdb.Txn, recent *recentRead) error {
			t = &tx{txn: txn, maxRecord: s.maxRecord, update: true, recent: recent}
			if err := fn(t); err != nil {
				return err
			}
			return t.flushCounts()
		})
		if t != nil && t.toVlog {
			s.markVlog()
		}
		if err == nil && s.wrote != nil {
			s.wrote(t.written)
		}
		if !errors.Is(err, badgerdb.ErrConflict) {
			return mapErr(err)
		}
	}
	return fmt.Errorf("transaction conflicted %d times: %w", maxConflictAttempts, err)
}

// update is badgerdb.DB.Update, with the commit through the cache of recent
// records (recent.go).
func (s *Store) update(fn func(*badgerdb.Txn, *recentRead) error) error {
	if s.db.IsClosed() {
		return badgerdb.ErrDBClosed
	}
	recent := s.recent.begin()
	defer s.recent.end()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	if err := fn(txn, recent); err != nil {
		return err
	}
	return recent.commit(txn)
}

// markVlog tells the next Sync that a value may have been written to the
// value log since the last one.
func (s *Store) markVlog() {
	if s.logs != nil {
		s.logs.markVlog()
	}
}

// View runs fn in a read-only transaction that sees one consistent snapshot.
func (s *Store) View(fn func(engine.Tx) error) error {
	return mapErr(s.db.View(func(txn *badgerdb.Txn) error { return fn(&tx{txn: txn, maxRecord: s.maxRecord}) }))
}

// Sync returns once every transaction committed before the call is on disk.
// Callers that arrive while an fsync is in flight share the next one. It is a
// no-op for an in-memory store or with Options.NoSync.
func (s *Store) Sync() error {
	if s.sync == nil {
		if s.db.IsClosed() {
			return engine.ErrClosed
		}
		return nil
	}
	return mapErr(s.sync.Sync())
}

// Close finishes pending Syncs, then flushes and closes Badger. Later calls
// return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.sync != nil {
			s.sync.close()
		}
		if s.logs != nil {
			s.logs.close()
		}
		if s.stopGC != nil {
			close(s.stopGC)
			<-s.gcDone
			s.stopPageOut()
		}
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("close badger store: %w", err)
		}
	})
	return s.closeErr
}

// mapErr turns Badger's errors into the engine's where the engine has one.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, badgerdb.ErrDBClosed):
		return fmt.Errorf("badger store: %w", engine.ErrClosed)
	case noSpace(err):
		return fmt.Errorf("%w: %w", engine.ErrNoSpace, err)
	case errors.Is(err, badgerdb.ErrReadOnlyTxn):
		return fmt.Errorf("%w: %w", errReadOnly, err)
	case errors.Is(err, badgerdb.ErrTxnTooBig):
		// The request's payloads together are more than one transaction
		// holds: the caller's to fix, not an outage.
		return fmt.Errorf("%w: %w", &engine.InvalidError{Field: "request", Reason: "its payloads together exceed what one transaction can hold (about 9 MiB)"}, err)
	}
	return err
}

// slogLogger forwards Badger's warnings and errors to slog and drops its
// informational chatter.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Errorf(f string, args ...any) {
	s.l.Error(strings.TrimSpace(fmt.Sprintf(f, args...)), "component", "badger")
}

func (s slogLogger) Warningf(f string, args ...any) {
	s.l.Warn(strings.TrimSpace(fmt.Sprintf(f, args...)), "component", "badger")
}

func (slogLogger) Infof(string, ...any)  {}
func (slogLogger) Debugf(string, ...any) {}
