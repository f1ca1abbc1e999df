package badger

import (
	"sync"

	badgerdb "github.com/dgraph-io/badger/v4"
)

// The engine's transitions read back the records the transitions just
// before them wrote: a lease reads the activity its schedule wrote, a
// completion the activity its lease wrote, every transition of a workflow
// reads the workflow, and every batch the latency records of its activity
// types. Badger answers such a read by searching its
// memtables and then every level of its tree (a point read cannot stop at the
// newest version it finds, because the version it wants is the reader's
// timestamp), and copies the value twice on the way. That was a tenth of
// the daemon's CPU at full load (issue 12).
//
// So read-write transactions keep the encoded records (recentKey) they read or wrote in recentRecords, once they commit, and a
// later read-write transaction decodes a record it finds there instead of
// asking Badger. The cache holds what Badger holds for those keys as long
// as one Update runs at a time, which is how the engine's batcher calls it:
// nothing else writes records, and a transaction that does not commit leaves
// the cache as it was, less the keys it wrote. When Updates overlap (a store
// used by several writers, or an Update inside another), the cache is
// emptied and unused until none runs; and a transaction that had read from it
// when another began fails its commit with a conflict, and runs again,
// because Badger, which never saw those reads, cannot tell whether the other
// one changed them. Views never use the cache: they read the snapshot Badger
// gives them.

// recentBytes bounds the bytes of keys and values the cache holds.
const recentBytes = 4 << 20

// recentMaxValue is the largest value the cache keeps: a large record is
// rarely hot, and would push out many small ones.
const recentMaxValue = 16 << 10

// recentRecords holds encoded records by key, up to recentBytes, for the
// read-write transactions of one Store.
type recentRecords struct {
	mu    sync.Mutex
	vals  map[string][]byte
	bytes int
	// running counts the Updates under way; overlapped is set when a
	// second one began, until none runs.
	running    int
	overlapped bool
}

func newRecentRecords() *recentRecords {
	return &recentRecords{vals: make(map[string][]byte)}
}

// begin starts the cache's part in one attempt of an Update; end must
// follow it.
func (r *recentRecords) begin() *recentRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running++
	if r.running > 1 && !r.overlapped {
		r.overlapped = true
		clear(r.vals)
		r.bytes = 0
	}
	return &recentRead{cache: r}
}

// end ends what begin started.
func (r *recentRecords) end() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running--
	if r.running == 0 {
		r.overlapped = false
	}
}

// get returns the record at key, if the cache has it and may be used. The
// value is shared: a caller only reads it.
func (r *recentRecords) get(key []byte) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.overlapped {
		return nil, false
	}
	v, ok := r.vals[string(key)]
	return v, ok
}

// put notes v as the record at key, under r.mu; nil drops the key (a deleted record is
// read from Badger, which knows it is gone).
func (r *recentRecords) put(key string, v []byte) {
	if old, ok := r.vals[key]; ok {
		r.bytes -= len(key) + len(old)
		delete(r.vals, key)
	}
	if v == nil || len(v) > recentMaxValue {
		return
	}
	// Past the bound, drop records until it fits: which ones does not
	// matter for correctness, and a map's iteration order makes it cheap.
	for k, old := range r.vals {
		if r.bytes+len(key)+len(v) <= recentBytes {
			break
		}
		r.bytes -= len(k) + len(old)
		delete(r.vals, k)
	}
	r.vals[key] = v
	r.bytes += len(key) + len(v)
}

// recentRead is what one read-write transaction read from Badger and wrote,
// of the keys the cache keeps, for the cache once it commits.
type recentRead struct {
	cache *recentRecords
	// read holds values read from Badger in the transaction.
	read map[string][]byte
	// wrote holds the values the transaction wrote, nil for a delete.
	wrote map[string][]byte
	// served is set once a read was answered by the cache.
	served bool
}

// lookup returns the record at key as the transaction sees it: its own
// write, or the cache's. found is false when neither knows the key.
func (r *recentRead) lookup(key []byte) (v []byte, found bool) {
	if v, ok := r.wrote[string(key)]; ok {
		return v, true
	}
	if v, ok := r.read[string(key)]; ok {
		return v, true
	}
	v, found = r.cache.get(key)
	r.served = r.served || found
	return v, found
}

func (r *recentRead) noteRead(key, v []byte) {
	if r.read == nil {
		r.read = make(map[string][]byte)
	}
	r.read[string(key)] = v
}

func (r *recentRead) noteWrite(key, v []byte) {
	if r.wrote == nil {
		r.wrote = make(map[string][]byte)
	}
	r.wrote[string(key)] = v
}

// commit commits txn and moves what the transaction read and wrote into
// the cache, in commit order. When another Update began while this one ran
// and this one read from the cache, it returns badgerdb.ErrConflict instead:
// see the top of this file.
func (r *recentRead) commit(txn *badgerdb.Txn) error {
	c := r.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overlapped {
		if r.served {
			return badgerdb.ErrConflict
		}
		return txn.Commit()
	}
	if err := txn.Commit(); err != nil {
		// The commit may have reached Badger in part.
		for k := range r.wrote {
			c.put(k, nil)
		}
		return err
	}
	for k, v := range r.read {
		if _, ok := r.wrote[k]; !ok {
			c.put(k, v)
		}
	}
	for k, v := range r.wrote {
		c.put(k, v)
	}
	return nil
}

// recentKey reports whether the cache keeps the record at key: activities,
// workflows, and the latency records every batch reads and writes back.
func recentKey(key []byte) bool {
	if len(key) == 0 {
		return false
	}
	switch key[0] {
	case prefixActivity, prefixWorkflow, prefixLatency, prefixLatencyHour:
		return true
	}
	return false
}
