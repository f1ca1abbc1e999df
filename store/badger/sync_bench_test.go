package badger

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// BenchmarkSyncAlternatives compares the durable barriers Badger allows, each
// under the group commit (BenchmarkGroupCommit's op: one small record, then
// Sync), from one writer and from 64:
//
//   - LogSync: what Store.Sync does (logsync.go): fdatasync of the
//     write-ahead logs, and of the value log only after a value went there;
//
//   - DBSync: Badger's DB.Sync, an msync of the active memtable's log and of
//     the newest value-log file at every barrier (what Store.Sync did);
//
//   - MemTable4MiB / MemTable64MiB: LogSync with smaller or larger memtables
//     (the default budget's are 16 MiB);
//
//   - SyncWrites: Badger's own option, an msync of both logs inside every
//     commit, Store.Sync then a no-op;
//
//   - LogSyncAfterIdle: LogSync from one writer that waits 1 ms before each
//     commit, as the commits of a lone activity's round do (the worker's
//     and the workflow's turns come between them). Its sync-p50-µs against
//     LogSync/Writers1's is what the disk charges a barrier that follows a
//     pause: about 1.6 times a back-to-back one on the virtual disk it was
//     measured on.
//
// sync-p50-µs and sync-p99-µs time Store.Sync alone.
//
//	go test -run '^$' -bench SyncAlternatives ./store/badger
func BenchmarkSyncAlternatives(b *testing.B) {
	variants := []struct {
		name   string
		open   func(b *testing.B, dir string) *Store
		pause  time.Duration
		single bool // one writer only
	}{
		{name: "LogSync", open: func(b *testing.B, dir string) *Store { return openWith(b, dir, false, 0) }},
		{name: "LogSyncAfterIdle", open: func(b *testing.B, dir string) *Store { return openWith(b, dir, false, 0) }, pause: time.Millisecond, single: true},
		{name: "DBSync", open: func(b *testing.B, dir string) *Store { return openWith(b, dir, true, 0) }},
		{name: "MemTable4MiB", open: func(b *testing.B, dir string) *Store { return openWith(b, dir, false, 4<<20) }},
		{name: "MemTable64MiB", open: func(b *testing.B, dir string) *Store { return openWith(b, dir, false, 64<<20) }},
		{name: "SyncWrites", open: func(b *testing.B, dir string) *Store {
			db, err := badgerdb.Open(badgerOptions(dir, Options{}).WithSyncWrites(true))
			if err != nil {
				b.Fatal(err)
			}
			s := &Store{db: db, dir: dir, maxRecord: maxRecordSizeOnDisk, recent: newRecentRecords()}
			b.Cleanup(func() { db.Close() })
			return s
		}},
	}
	for _, v := range variants {
		for _, writers := range []int{1, 64} {
			if v.single && writers > 1 {
				continue
			}
			b.Run(fmt.Sprintf("%s/Writers%d", v.name, writers), func(b *testing.B) {
				s := v.open(b, b.TempDir())
				var next atomic.Int64
				var mu sync.Mutex
				syncs := make([]time.Duration, 0, b.N)
				op := func() error {
					if v.pause > 0 {
						time.Sleep(v.pause)
					}
					id := fmt.Sprint(next.Add(1))
					err := s.Update(func(tx engine.Tx) error {
						return tx.PutLatency(&durablev1.LatencyRecord{ActivityType: id, Attempts: 1, Buckets: []int64{1}})
					})
					if err != nil {
						return err
					}
					began := time.Now()
					err = s.Sync()
					took := time.Since(began)
					mu.Lock()
					syncs = append(syncs, took)
					mu.Unlock()
					return err
				}
				b.ResetTimer()
				var wg sync.WaitGroup
				var left atomic.Int64
				left.Store(int64(b.N))
				for range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for left.Add(-1) >= 0 {
							if err := op(); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
				slices.Sort(syncs)
				if n := len(syncs); n > 0 {
					b.ReportMetric(float64(syncs[n/2].Microseconds()), "sync-p50-µs")
					b.ReportMetric(float64(syncs[n*99/100].Microseconds()), "sync-p99-µs")
				}
				if s.sync != nil {
					b.ReportMetric(float64(b.N)/float64(max(s.sync.runs(), 1)), "commits/sync")
				}
			})
		}
	}
}

// openWith opens a store in dir that syncs with DB.Sync when dbSync is set,
// with memtables of memTable bytes (0: the default budget's).
func openWith(b *testing.B, dir string, dbSync bool, memTable int64) *Store {
	opts := Options{}
	if memTable > 0 {
		mem, _ := MemoryFor(DefaultMemoryBudget)
		mem.MemTableSize = memTable
		opts.Memory = mem
	}
	s, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if dbSync {
		s.sync.close()
		s.sync = newGroupSync(s.db.Sync)
	}
	return s
}
