package badger

import (
	"os"
	"syscall"
)

// datasync writes f's data, and what of its metadata reading it back needs,
// to disk (fdatasync).
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
