package badger

import (
	"fmt"

	badgerdb "github.com/dgraph-io/badger/v4"
)

// The figures below come from BenchmarkMemoryLargePayloads (internal/bench):
// a real durabled with fsync on, 100 workflows × 50 activities with 64 KiB
// inputs, 330 MB of live data. With the store as it was (every value in the
// LSM tree, 3 memtables of 64 MiB, a 32 MiB block cache, nothing else) the
// daemon peaked at 4.5–5.2 GB resident and kept over 3 GB a minute after
// the load: 85% of the heap was Badger building tables, in memtable flushes
// and compactions that copied every payload again. Each choice was then
// added on top of the ones before it, two runs each (peak resident set /
// a minute after the load, in MB):
//
//	value threshold 1 KiB               1160, 1161 / 1160, 1161
//	memtables 2 × 16 MiB                1094, 1089 / 1094, 1073
//	page-out of the mapped logs          473,  501 /  107,  110
//	Go soft limit of 3/4 of the budget   302,  299 /   83,  117
//	block cache 16 MiB, index cache 8    301,  301 /   98,  124
//	value-log garbage collection         334,  316 /  131,  118
//
// The rows are explained where each choice is made.

// Memory budgets, in bytes.
const (
	// DefaultMemoryBudget is the budget a daemon runs with unless told
	// otherwise. With it the load above peaks at about 300 MB resident
	// and settles near 100 MB.
	DefaultMemoryBudget int64 = 256 << 20
	// MinMemoryBudget is the smallest budget the store opens with: below
	// it the memtables would be so small that one change of a few hundred
	// activities could not fit a transaction, and the rest of the budget
	// would not hold the Go runtime of an idle daemon.
	MinMemoryBudget int64 = 64 << 20
)

// valueThreshold is the size from which a value lives in Badger's value log
// rather than in its LSM tree. The engine's own records (workflow and
// activity bookkeeping, history events, index entries) are well below it
// and stay in the tree, where scans read them in order; a payload of a KiB
// or more goes to the value log, written once, instead of being copied by
// every compaction and held in memtables and table builders. On the load
// above this alone took the anonymous memory (the heap) from a 3.6–4.3 GB
// peak to 0.5 GB, and the LSM tables on disk from 920 MB to a few MB; what
// stayed resident was the value log's mapped pages (page-out, below).
const valueThreshold = 1 << 10

// valueLogFileSize is the size at which Badger starts a new value-log file.
// Garbage collection rewrites one file at a time, and a file's pages are
// what the page-out of mapped logs works on, so files are kept small.
// Badger's default is 1 GiB, which would hold the load above in one file.
// One run with 16 MiB files peaked at 256 MB, against 286–334 MB in six
// runs with 64 MiB: a single run, within what the page-out's timing moves,
// for four times the files; 64 MiB stays.
const valueLogFileSize = 64 << 20

// Memory is how the store spends its memory budget (MemoryFor).
type Memory struct {
	// Budget is the total it was made from.
	Budget int64
	// MemTableSize is the size of each of the NumMemtables memtables
	// (the one written and the ones waiting to be flushed). A memtable's
	// size also bounds one transaction: 15% of it, counting keys, values
	// under a KiB and about 14 bytes for each larger value. With payloads
	// in the value log a memtable holds only records and pointers, and
	// going from 3 × 64 MiB to 2 × 16 MiB took the load's peak heap from
	// 476–537 MB to 306–371 MB with no loss of throughput.
	MemTableSize int64
	NumMemtables int
	// BlockCacheSize caches decompressed blocks of the LSM tree. With the
	// payloads out of the tree it stays small (a few MB of tables after
	// the load above), and halving the block cache to 16 MiB left the peak
	// where it was (301, 301 MB against 302, 299). IndexCacheSize is
	// Badger's cache of the tables' indexes and Bloom filters, which Badger
	// (v4.9.6, table.fetchIndex) consults only for encrypted tables; ours
	// are not, so their indexes are read from the mapped table files and
	// the bound holds nothing today. Giving its share to the block cache
	// instead was measured with a million activities waiting and gained
	// nothing, so the split stays.
	BlockCacheSize int64
	IndexCacheSize int64
	// MappedLogs is how much of the value log and write-ahead log, which
	// Badger writes and reads through memory maps, may stay resident in
	// the process before the store asks the kernel to reclaim those pages
	// (Linux only; see pageout_linux.go). Without the page-out, the whole
	// value log written stays resident: 1,090 MB after the load above,
	// and still there a minute later; with 64 MiB, 473–501 MB at the peak
	// and 107–110 MB a minute after.
	MappedLogs int64
	// GoLimit is what is left for the Go runtime (the memtables and caches
	// above, requests in flight, everything else on the heap): a soft
	// memory limit for the process (runtime/debug.SetMemoryLimit), which
	// the daemon sets; the store does not. Without it the heap grew to
	// 337–372 MB during the load above before the collector caught up;
	// with 192 MiB, 175 MB, and the peak resident set fell to 299–302 MB.
	GoLimit int64
}

// ResidentCeiling is the resident set (VmRSS, and so its peak VmHWM) a
// daemon with this budget stays under, as long as what the budget does not
// bound (requests in flight, the queues of waiting activities, watchers)
// fits in the Go heap's share: the budget, plus a quarter for the Go heap
// overshooting its soft limit while the collector catches up and for the
// mapped logs growing between two looks of the page-out, plus 64 MiB for
// what no part of the budget counts (the daemon's own code and the LSM
// tables' mapped pages). For the default 256 MiB that is 384 MiB (403 MB);
// the 64 KiB load of BenchmarkMemoryLargePayloads peaks at 286–334 MB.
func (m Memory) ResidentCeiling() int64 {
	return m.Budget + m.Budget/4 + 64<<20
}

// MemoryFor splits a memory budget in bytes, the rule durabled's
// --memory-budget documents:
//
//   - a quarter for resident pages of the mapped logs (MappedLogs);
//   - the other three quarters are the Go runtime's (GoLimit), and of the
//     whole budget two memtables of a sixteenth each (at most 64 MiB), a
//     sixteenth for the block cache and a thirty-second for the index cache
//     are set aside in it for Badger; the rest (at least 17/32) is the
//     heap of requests in flight and of everything else.
//
// A budget below MinMemoryBudget is an error.
func MemoryFor(budget int64) (Memory, error) {
	if budget < MinMemoryBudget {
		return Memory{}, fmt.Errorf("a memory budget of %d bytes is too small: the store needs at least %d MiB", budget, MinMemoryBudget>>20)
	}
	return Memory{
		Budget:         budget,
		MemTableSize:   min(budget/16, 64<<20),
		NumMemtables:   2,
		BlockCacheSize: budget / 16,
		IndexCacheSize: budget / 32,
		MappedLogs:     budget / 4,
		GoLimit:        budget - budget/4,
	}, nil
}

// badgerOptions are the options Badger opens dir with for opts.
func badgerOptions(dir string, opts Options) badgerdb.Options {
	bo := badgerdb.DefaultOptions(dir)
	if opts.InMemory {
		bo = badgerdb.DefaultOptions("").WithInMemory(true)
	}
	bo = bo.
		// Commits reach the write-ahead log without fsync; Sync (group commit)
		// makes them durable. This is what keeps many writers fast.
		WithSyncWrites(false).
		// Not WithLoggingLevel: it replaces the logger with Badger's own,
		// which writes to stderr past --log-level; slogLogger drops Badger's
		// chatter below WARNING itself.
		WithLogger(slogLogger{opts.logger()}).
		WithMetricsEnabled(false).
		// Two compactors, as before: with the payloads in the value log
		// the load above ends with almost nothing in the LSM tables, so
		// compaction no longer shows in the heap, and a second compactor
		// keeps level 0 from stalling writes while one is busy.
		WithNumCompactors(2).
		WithReadOnly(opts.ReadOnly && !opts.InMemory)
	if opts.InMemory {
		// Everything lives in memtables: keep them large enough for the
		// transactions the engine writes, payloads included (in memory,
		// Badger keeps every value in the tree, whatever the threshold).
		return bo.WithMemTableSize(64 << 20).WithNumMemtables(3).WithBlockCacheSize(32 << 20)
	}
	mem := opts.memory()
	return bo.
		WithValueThreshold(valueThreshold).
		WithValueLogFileSize(valueLogFileSize).
		WithMemTableSize(mem.MemTableSize).
		WithNumMemtables(mem.NumMemtables).
		WithBlockCacheSize(mem.BlockCacheSize).
		WithIndexCacheSize(mem.IndexCacheSize)
}
