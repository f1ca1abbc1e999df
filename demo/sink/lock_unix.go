//go:build unix

package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive advisory lock on dir's lock file, so that a
// second process opening the same Store fails instead of counting apart.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("sink: %s is in use by another process (run one sink per directory and point workers at it with --sink-addr): %w", dir, err)
	}
	return func() { f.Close() }, nil
}
