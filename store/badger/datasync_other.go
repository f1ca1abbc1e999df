//go:build !linux

package badger

import "os"

// datasync is f.Sync where there is no fdatasync.
func datasync(f *os.File) error { return f.Sync() }
