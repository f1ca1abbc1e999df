package badger

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// syncsOf returns how many fdatasyncs each of s's logs has had.
func syncsOf(t *testing.T, s *Store) map[string]int {
	t.Helper()
	if s.logs == nil {
		t.Fatal("the store syncs through DB.Sync, not its logs")
	}
	return s.logs.synced()
}

func newest(t *testing.T, dir, ext string) string {
	t.Helper()
	seqs, err := listLogs(dir, ext)
	if err != nil || len(seqs) == 0 {
		t.Fatalf("no %s in %s: %v", ext, dir, err)
	}
	return logName(seqs[len(seqs)-1], ext)
}

func putAndSync(t *testing.T, s *Store, id string, input []byte) {
	t.Helper()
	a := newActivity("w", id, scheduled, time.Second, 1)
	a.Input = input
	mustUpdate(t, s, putActivities(a))
	if err := s.Sync(); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

func TestLogSync_ValueLogIsSyncedOnlyAfterAValueWentThere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	wal, vlog := newest(t, dir, walExt), newest(t, dir, vlogExt)
	putAndSync(t, s, "1", []byte("small"))
	before := syncsOf(t, s)
	if before[wal] != 1 || before[vlog] != 1 {
		t.Fatalf("first sync: %v, want one of %s and, for what came before the open, one of %s", before, wal, vlog)
	}
	putAndSync(t, s, "2", []byte("small"))
	if got := syncsOf(t, s); got[wal] != 2 || got[vlog] != 1 {
		t.Errorf("after a small record: %v, want %s synced again and %s not", got, wal, vlog)
	}
	putAndSync(t, s, "3", bytes.Repeat([]byte("x"), valueThreshold))
	if got := syncsOf(t, s); got[wal] != 3 || got[vlog] != 2 {
		t.Errorf("after a record of %d bytes: %v, want both synced", valueThreshold, got)
	}
	s.markVlog() // as a value-log collection does
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := syncsOf(t, s); got[vlog] != 3 {
		t.Errorf("after a collection: %v, want %s synced", got, vlog)
	}
	s = reopenDisk(t, s).(*Store)
	mustView(t, s, func(tx engine.Tx) error {
		a, err := tx.GetActivity("w", "3")
		if err == nil && len(a.GetInput()) != valueThreshold {
			t.Errorf("input of %d bytes after reopen, want %d", len(a.GetInput()), valueThreshold)
		}
		return err
	})
}

func TestLogSync_NewValueLogFileIsFoundBySyncOnlyOnceAValueWentThere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	first := newest(t, dir, vlogExt)
	big := bytes.Repeat([]byte("v"), 4<<20)
	// Values until Badger starts a new value-log file.
	for i := 0; newest(t, dir, vlogExt) == first; i++ {
		if i > 2*valueLogFileSize/len(big) {
			t.Fatalf("no new value-log file after %d values of %d bytes", i, len(big))
		}
		putAndSync(t, s, fmt.Sprint("big-", i), big)
	}
	second := newest(t, dir, vlogExt)
	// Small records do not touch the value log: their barriers neither sync
	// its files nor look for a new one (only for a new write-ahead log).
	before, looks := syncsOf(t, s), s.logs.looked()
	putAndSync(t, s, "small", []byte("small"))
	if got := syncsOf(t, s); got[first] != before[first] || got[second] != before[second] {
		t.Errorf("after a small record: %v, want neither %s nor %s synced (before: %v)", got, first, second, before)
	}
	if got := s.logs.looked() - looks; got != 1 {
		t.Errorf("a barrier after a small record looked for %d new files, want 1 (the write-ahead log's)", got)
	}
	putAndSync(t, s, "last", big)
	if got := syncsOf(t, s); got[second] != before[second]+1 || got[first] != before[first] {
		t.Errorf("after a value in the new file: %v, want %s synced once more and %s left (before: %v)", got, second, first, before)
	}
	s = reopenDisk(t, s).(*Store)
	mustView(t, s, func(tx engine.Tx) error {
		a, err := tx.GetActivity("w", "last")
		if err == nil && !bytes.Equal(a.GetInput(), big) {
			t.Errorf("input of %d bytes after reopen, want %d", len(a.GetInput()), len(big))
		}
		return err
	})
}

func TestLogSync_FullMemtableLogIsSyncedOnceMoreThenLeft(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mem, err := MemoryFor(DefaultMemoryBudget)
	if err != nil {
		t.Fatal(err)
	}
	mem.MemTableSize = 1 << 20
	s, err := Open(dir, Options{Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	first := newest(t, dir, walExt)
	putAndSync(t, s, "0", nil)
	// Commits until Badger moves to a new write-ahead log.
	for i := 1; newest(t, dir, walExt) == first; i++ {
		if i > 100_000 {
			t.Fatalf("no new write-ahead log after %d commits", i)
		}
		mustUpdate(t, s, putActivities(newActivity("w", fmt.Sprint(i), scheduled, time.Second, int64(i))))
	}
	second := newest(t, dir, walExt)
	before := syncsOf(t, s)[first]
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	got := syncsOf(t, s)
	if got[first] != before+1 || got[second] != 1 {
		t.Errorf("sync after the switch: %v, want %s synced a last time and %s once", got, first, second)
	}
	putAndSync(t, s, "again", nil)
	got = syncsOf(t, s)
	if got[first] != before+1 || got[second] != 2 {
		t.Errorf("next sync: %v, want only %s synced", got, second)
	}
	checkIndexes(t, s)
}

func TestLogSync_DirectoryWithoutLogsIsRefused(t *testing.T) {
	t.Parallel()
	if _, err := newLogSync(t.TempDir()); err == nil {
		t.Error("newLogSync of an empty directory succeeded; the store would sync nothing")
	}
	if _, err := newLogSync(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("newLogSync of a missing directory succeeded")
	}
}

// The group commit over the logs still answers every caller after a
// barrier that started after its commit (BenchmarkGroupCommit's op from
// many goroutines, then a reopen).
func TestLogSync_ConcurrentCommitsAreAllThereAfterReopen(t *testing.T) {
	t.Parallel()
	s := openDir(t, t.TempDir())
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		go func() {
			err := s.Update(func(tx engine.Tx) error {
				return tx.PutLatency(&durablev1.LatencyRecord{ActivityType: fmt.Sprint("t", i), Attempts: 1})
			})
			if err == nil {
				err = s.Sync()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s = reopenDisk(t, s).(*Store)
	mustView(t, s, func(tx engine.Tx) error {
		ls, err := tx.ListLatency()
		if err == nil && len(ls) != n {
			t.Errorf("%d latency records after reopen, want %d", len(ls), n)
		}
		return err
	})
}
