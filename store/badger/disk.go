package badger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tinyllm/durable/engine"
)

// What the store needs of the disk: how much room Badger may take at once
// once writes stop (LargestMappedFile, MinReserve), how to open on a volume
// that has none left (read-only), and how its out-of-space errors read.

// LargestMappedFile is the size at which Badger maps the largest file it
// writes through memory, with the options Open would use: a memtable's log
// (.mem) is mapped at twice the memtable size and a value log file at twice
// its file size. The pages of such a file take disk space as they are
// written, up to this size.
func LargestMappedFile(opts Options) uint64 {
	bo := badgerOptions("", opts)
	return uint64(max(2*bo.MemTableSize, 2*bo.ValueLogFileSize))
}

// MinReserve is the least free space the store needs once writes stop: the
// file being written may fill its whole mapping, and Badger goes on writing
// after that (the memtables are flushed into tables, and compaction rewrites
// tables before it deletes the old ones), for which the rule allows as much
// again: twice LargestMappedFile. Below it, a full disk can still end the
// process with SIGBUS.
func MinReserve(opts Options) uint64 { return 2 * LargestMappedFile(opts) }

// DefaultReserveBytes is the disk reserve when none is configured, unless
// the store needs more (DefaultReserve).
const DefaultReserveBytes = 256 << 20

// DefaultReserve is the disk reserve of a store opened with opts when none
// is configured: 256 MiB, or MinReserve when that is larger.
func DefaultReserve(opts Options) Reserve {
	return Reserve{Bytes: max(DefaultReserveBytes, MinReserve(opts))}
}

// errReadOnly refuses writes to a store opened read-only.
var errReadOnly = fmt.Errorf("%w: the store was opened read-only", engine.ErrWritesRefused)

// noSpace reports whether err is the file system's "no space left on
// device" (or its quota's). Badger flattens the errors it wraps into text,
// so their text is matched when errors.Is cannot see them.
func noSpace(err error) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}

// truncateNeeded is how Badger says, in read-only mode, that a memtable log
// must be cut at its last whole entry: a crash left it at its mapped size,
// its tail unwritten.
var truncateNeeded = regexp.MustCompile(`opening fid: (\d+) .*end offset: (\d+) < size: (\d+)`)

// memLogHeader is the size of the header of a Badger memtable log (a key
// id and an IV); a log no longer than it holds no entry.
const memLogHeader = 20

// OpenReadOnly is Open with Options.ReadOnly for a store in dir.
func OpenReadOnly(dir string, opts Options) (*Store, error) {
	opts.ReadOnly = true
	return Open(dir, opts)
}

// openReadOnly opens Badger read-only. A memtable log left by a crash (or a
// SIGBUS on a full disk) is at its mapped size, its tail never written;
// Badger cuts it to its last whole entry when it opens for writing, and
// refuses to open read-only until that is done. openReadOnly makes the same
// cut and opens again. Cutting a file frees space and writes nothing else,
// so it is safe on a full volume. Before it opens, it also cuts each log at
// its first hole: on tmpfs even reading a hole through a mapping takes a
// page, which a full volume does not have.
func openReadOnly(bo badgerdb.Options) (*badgerdb.DB, error) {
	if err := trimHoles(bo.Dir); err != nil {
		return nil, err
	}
	for range 64 {
		db, err := badgerdb.Open(bo)
		if err == nil {
			return db, nil
		}
		m := truncateNeeded.FindStringSubmatch(err.Error())
		if m == nil {
			return nil, err
		}
		fid, _ := strconv.Atoi(m[1])
		end, _ := strconv.ParseInt(m[2], 10, 64)
		size, _ := strconv.ParseInt(m[3], 10, 64)
		path := filepath.Join(bo.Dir, fmt.Sprintf("%05d.mem", fid))
		info, serr := os.Stat(path)
		if serr != nil || info.Size() != size || end >= size {
			return nil, err
		}
		cut := os.Truncate(path, end)
		if end <= memLogHeader {
			// No entry at all: Badger deletes such a log when it opens it,
			// and fails to (loudly) when it opens it read-only.
			cut = os.Remove(path)
		}
		if cut != nil {
			return nil, fmt.Errorf("%w (cutting %s at its last whole entry: %w)", err, path, cut)
		}
	}
	return nil, errors.New("open badger store read-only: memtable logs still need cutting after 64 tries")
}

// trimHoles cuts every memtable log in dir at its first hole (trimHole).
func trimHoles(dir string) error {
	logs, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return err
	}
	for _, path := range logs {
		if err := trimHole(path); err != nil {
			return fmt.Errorf("cut memtable log %s at its first hole: %w", path, err)
		}
	}
	return nil
}
