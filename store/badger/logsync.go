package badger

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// logSync is the durable barrier behind Store.Sync: an fdatasync of each
// write-ahead log that may hold a commit not yet on disk, and of the newest
// value-log file only when something was written to the value log since the
// last barrier. It is what DB.Sync does, less one device flush per barrier
// and plus one file DB.Sync misses (Badger v4.9.6):
//
//   - DB.Sync msyncs the active memtable's write-ahead log and the newest
//     value-log file (db.go, DB.Sync). On Linux an msync(MS_SYNC) of a
//     shared mapping is vfs_fsync_range(file, range, datasync=1)
//     (mm/msync.c), the same barrier as fdatasync of the file.
//   - Each of the two costs a flush of the device's cache, even for a file
//     with nothing dirty, which is what the value log is when every value is
//     below the value threshold: Badger writes a value to the value log only
//     when it is at least the threshold (value.go, valueLog.write,
//     skipVlogAndSetThreshold; the threshold is fixed without
//     VLogPercentile). The store knows the size of every value it commits
//     (tx.put), and the value-log collection it runs itself
//     (collectValueLog) is the only other writer there; either marks the
//     value log dirty, and only then is it synced.
//   - When a memtable fills, the write goroutine moves it to the immutable
//     list and opens a new write-ahead log (db.go, ensureRoomForWrite)
//     without syncing the old one, which lives until the memtable has been
//     written to a synced table (table.CreateTable msyncs it) and deleted.
//     DB.Sync syncs only the new log, so a commit written just before the
//     switch and acknowledged after it was on disk only once that flush
//     completed. logSync syncs every write-ahead log it has seen that is
//     not known to be complete, and an old one a last time after the newer
//     one appeared: Badger writes only to the newest log, and creates it
//     before writing to it, so a log with a newer one beside it at the
//     start of a barrier gets no write after that barrier.
//   - Files are named by sequence: memtables %05d.mem (memtable.go,
//     mtFilePath; ids from reserveFileID, one apart) and value logs
//     %06d.vlog (value.go, fpath; maxFid+1). A value-log file that is
//     replaced is synced by Badger (logFile.doneWriting truncates it, and
//     z.MmapFile.Truncate msyncs first), so only the newest needs it.
//
// A data directory in which no write-ahead log can be found (another layout
// of Badger's files) keeps DB.Sync (newLogSync fails).
type logSync struct {
	dir string

	// vlogDirty is set once a value may have been written to the value log
	// since the last barrier; the barrier clears it before it syncs.
	vlogDirty atomic.Bool

	mu   sync.Mutex // one barrier at a time (groupSync runs one anyway)
	wals []*seqFile // ascending; the last is the active log
	vlog *seqFile   // the newest value-log file

	// datasyncs counts the fdatasyncs run, by file name, and looks the
	// log files looked for (opened by name, perhaps not there yet); both
	// for tests.
	datasyncs map[string]int
	looks     int
}

// seqFile is one log file, open for fdatasync.
type seqFile struct {
	seq  int
	name string
	f    *os.File
}

const (
	walExt  = ".mem"
	vlogExt = ".vlog"
)

// newLogSync opens the logs of dir as Badger left them after its open.
func newLogSync(dir string) (*logSync, error) {
	l := &logSync{dir: dir, datasyncs: map[string]int{}}
	wals, err := listLogs(dir, walExt)
	if err != nil {
		return nil, err
	}
	vlogs, err := listLogs(dir, vlogExt)
	if err != nil {
		return nil, err
	}
	if len(wals) == 0 || len(vlogs) == 0 {
		return nil, fmt.Errorf("no write-ahead log (%s) or value log (%s) in %s", walExt, vlogExt, dir)
	}
	for _, seq := range wals {
		f, err := l.open(seq, walExt)
		if err != nil {
			l.close()
			return nil, err
		}
		if f != nil {
			l.wals = append(l.wals, f)
		}
	}
	if l.vlog, err = l.open(vlogs[len(vlogs)-1], vlogExt); err != nil || l.vlog == nil || len(l.wals) == 0 {
		l.close()
		return nil, fmt.Errorf("open the logs of %s: %v", dir, err)
	}
	// Whatever was written before this open is synced once.
	l.vlogDirty.Store(true)
	return l, nil
}

// listLogs returns the sequence numbers of dir's files ending in ext,
// ascending.
func listLogs(dir, ext string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var seqs []int
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ext)
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(name); err == nil {
			seqs = append(seqs, n)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

func logName(seq int, ext string) string {
	if ext == walExt {
		return fmt.Sprintf("%05d%s", seq, ext)
	}
	return fmt.Sprintf("%06d%s", seq, ext)
}

// open opens one log; nil when it does not exist.
func (l *logSync) open(seq int, ext string) (*seqFile, error) {
	l.looks++
	name := logName(seq, ext)
	f, err := os.OpenFile(filepath.Join(l.dir, name), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", name, err)
	}
	return &seqFile{seq: seq, name: name, f: f}, nil
}

// markVlog notes that a value may have gone to the value log.
func (l *logSync) markVlog() { l.vlogDirty.Store(true) }

// sync is the barrier: every commit made before the call is on disk when it
// returns nil.
func (l *logSync) sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	vlog := l.vlogDirty.Swap(false)
	// Logs created since the last barrier. Badger creates a log before it
	// writes to it, so a commit that returned before this call is in one of
	// the logs found here or before.
	for {
		next, err := l.open(l.wals[len(l.wals)-1].seq+1, walExt)
		if err != nil {
			return err
		}
		if next == nil {
			break
		}
		l.wals = append(l.wals, next)
	}
	// A value-log file is created by a write to the value log, which marks
	// it dirty, so while it is clean there is no new file to look for (a
	// look is an open that fails, a few microseconds on the path of every
	// acknowledgment). A later dirty barrier finds every file created
	// since.
	for vlog {
		next, err := l.open(l.vlog.seq+1, vlogExt)
		if err != nil {
			l.vlogDirty.Store(true)
			return err
		}
		if next == nil {
			break
		}
		// The replaced file was synced by Badger when it was closed for
		// writing; the new one may hold values.
		l.vlog.f.Close()
		l.vlog = next
	}
	for _, w := range l.wals {
		if err := l.datasync(w); err != nil {
			if vlog {
				l.vlogDirty.Store(true)
			}
			return err
		}
	}
	// Every log but the newest got its last write before this barrier
	// began, and is now on disk.
	for _, w := range l.wals[:len(l.wals)-1] {
		w.f.Close()
	}
	l.wals = l.wals[len(l.wals)-1:]
	if vlog {
		if err := l.datasync(l.vlog); err != nil {
			l.vlogDirty.Store(true)
			return err
		}
	}
	return nil
}

func (l *logSync) datasync(s *seqFile) error {
	l.datasyncs[s.name]++
	if err := datasync(s.f); err != nil {
		return fmt.Errorf("sync %s: %w", s.name, err)
	}
	return nil
}

// looked returns how many log files the barriers and the open looked for,
// for tests.
func (l *logSync) looked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.looks
}

// synced returns how many fdatasyncs each log has had, for tests.
func (l *logSync) synced() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.datasyncs)
}

func (l *logSync) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.wals {
		w.f.Close()
	}
	l.wals = nil
	if l.vlog != nil {
		l.vlog.f.Close()
	}
}
