package badger

import (
	"errors"
	"log/slog"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
)

// Payloads of a KiB or more live in the value log (valueThreshold), and an
// activity's record, input included, is written again at each of its
// transitions: the log holds the old copies until garbage collection
// rewrites what is still live of a file and deletes it. Badger learns what
// is garbage when compactions drop the keys that pointed to it. The 64 KiB
// load of BenchmarkMemoryLargePayloads leaves 990 MB of value log for
// 330 MB of live data; it is collected once compactions have run over
// those keys, which a minute after the load they have not yet
// (TestValueLogGarbageIsCollected shows a log of 150 MiB with 6 MiB live
// halved by one pass). Collection reads the live values of a file back
// through its mapping; the page-out keeps those pages from staying.
const (
	// vlogGCEvery is how often the store collects. A file is one
	// valueLogFileSize; a busy daemon fills one in seconds, an idle one
	// not at all, and a pass over files with nothing to collect is cheap.
	vlogGCEvery = time.Minute
	// vlogGCRatio is the share of a file that must be garbage before it is
	// rewritten: at a half, rewriting costs at most the file's size and the
	// log on disk stays within about twice what is live.
	vlogGCRatio = 0.5
)

// collectValueLog runs collectOnce every vlogGCEvery until stop closes. A
// collection rewrites live values into the value log: wrote hears of each
// pass (logSync).
func collectValueLog(db *badgerdb.DB, logger *slog.Logger, stop <-chan struct{}, done chan<- struct{}, wrote func()) {
	defer close(done)
	t := time.NewTicker(vlogGCEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		_, err := collectOnce(db, stop)
		wrote()
		if err != nil {
			logger.Warn("value log garbage collection failed; it is tried again later", "err", err)
		}
	}
}

// collectOnce rewrites value-log files while one is worth it (or until stop
// closes) and returns how many it rewrote.
func collectOnce(db *badgerdb.DB, stop <-chan struct{}) (int, error) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return n, nil
		default:
		}
		err := db.RunValueLogGC(vlogGCRatio)
		switch {
		case errors.Is(err, badgerdb.ErrNoRewrite), errors.Is(err, badgerdb.ErrRejected):
			return n, nil
		case err != nil:
			return n, err
		}
	}
}
