package badger

// A read-write transaction remembers, for each record it has read, written
// or deleted, the index entries (and for an activity the count) of the
// record as it now stands in the transaction. Replacing or deleting the
// record then removes exactly those entries without reading the record a
// second time: a transition reads an activity and its workflow, then writes
// both, and the second read of each was a third of the store's reads.
//
// What is remembered is derived from the record when it is read or written,
// never kept as the record itself: the engine changes the records it reads
// before it writes them back. It lives in the tx, which lives as long as one
// attempt of one Badger transaction (Store.Update makes a new tx for each),
// so it dies with a transaction that fails or conflicts. A write that fails
// forgets its record, so that anything after it reads the record again, as
// before.

// knownRecord is what a transaction knows of one record key.
type knownRecord struct {
	// exists is false for a record read as missing or deleted here.
	exists bool
	// index holds the record's index entries (see replaceIndex).
	index [][]byte
	// count is the activity count the record is in (activities only).
	count countRef
}

// known returns what the transaction knows of the record at key.
func (t *tx) known(key []byte) (knownRecord, bool) {
	k, ok := t.records[string(key)]
	return k, ok
}

// remember notes the record at key as it now stands in the transaction. Only
// read-write transactions remember: a view never writes.
func (t *tx) remember(key []byte, k knownRecord) {
	if !t.update {
		return
	}
	if t.records == nil {
		t.records = make(map[string]knownRecord)
	}
	t.records[string(key)] = k
}

// forget drops what the transaction knows of the record at key, after a
// write of it failed part way.
func (t *tx) forget(key []byte) {
	delete(t.records, string(key))
}
