package badger

import (
	"io"
	"os"
)

// seekHole is lseek's SEEK_HOLE on Linux.
const seekHole = 4

// trimHole cuts a memtable log at its first hole. A log is written from its
// start through a mapping, page by page, so everything after its first hole
// is unwritten.
func trimHole(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	hole, err := f.Seek(0, seekHole)
	if err != nil || hole >= info.Size() {
		return nil // no holes, or a file system that cannot say
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return f.Truncate(hole)
}
