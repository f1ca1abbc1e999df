package badger

import (
	"bytes"

	badgerdb "github.com/dgraph-io/badger/v4"
)

// scanPage is how many entries a scan whose callback may wait reads under
// one iterator (see pages).
const scanPage = 1024

// pageScan says what pages walks: the entries under prefix from seek on
// (from the prefix, for nil), backwards with reverse; values says whether
// their values are read.
type pageScan struct {
	prefix, seek    []byte
	reverse, values bool
}

// pages walks the entries s names a page of scanPage at a time: read takes
// what it needs of each entry while the page's iterator is open (false ends
// the walk before that entry), then the iterator is closed and each is
// called for the page's entries (false ends the walk). Between pages the
// transaction holds nothing of Badger's: an open iterator keeps the
// memtables it started with in memory, and the tables and value-log files
// it reads on disk, however long its caller waits, and a Watch's caller
// waits for a client (engine.Tx.ScanActivities says fn may). The next page
// seeks past the last key read, in the transaction's same view.
func pages[T any](t *tx, s pageScan, read func(*badgerdb.Item) (T, bool, error), each func(T) (bool, error)) error {
	seek := s.seek
	if seek == nil {
		seek = s.prefix
	}
	var after []byte // the last key of the page before
	for {
		page, ended, last, err := readPage(t, s, seek, after, read)
		if err != nil {
			return err
		}
		for _, v := range page {
			if more, err := each(v); err != nil || !more {
				return err
			}
		}
		if ended {
			return nil
		}
		after, seek = last, last
		if !s.reverse {
			// The smallest key after last.
			seek = append(bytes.Clone(last), 0)
		}
	}
}

// readPage reads one page of pages from seek, skipping the key after
// (which a backward seek lands on again); ended says the walk is done.
func readPage[T any](t *tx, s pageScan, seek, after []byte, read func(*badgerdb.Item) (T, bool, error)) (page []T, ended bool, last []byte, err error) {
	it := t.txn.NewIterator(badgerdb.IteratorOptions{Prefix: s.prefix, Reverse: s.reverse, PrefetchValues: s.values, PrefetchSize: 16})
	defer it.Close()
	for it.Seek(seek); it.Valid(); it.Next() {
		item := it.Item()
		if after != nil && bytes.Equal(item.Key(), after) {
			continue
		}
		if len(page) == scanPage {
			return page, false, last, nil
		}
		v, ok, err := read(item)
		if err != nil || !ok {
			return page, true, nil, err
		}
		page = append(page, v)
		last = item.KeyCopy(last)
	}
	return page, true, last, nil
}
