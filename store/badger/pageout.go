package badger

import (
	"bufio"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// Badger writes its value log and its write-ahead log through memory maps,
// and reads values back through them. Every page written stays mapped into
// the daemon, and so counts in its resident set, until the file is deleted:
// without memory pressure the kernel has no reason to take it back, and a
// daemon that has written a gigabyte of payloads shows a gigabyte resident
// although nobody reads them. The page-out (pageout_linux.go) watches the
// resident mapped-file pages and, above Memory.MappedLogs, asks the kernel
// to reclaim the pages of the logs (MADV_PAGEOUT). That is a hint that keeps
// the data: a later read faults the page back in from disk, and pages not
// yet written back are left alone. The LSM tables are not paged out: their
// blocks are read through the block cache and are small next to the logs.

// span is a range of addresses mapped from one file.
type span struct {
	start, end uintptr
	path       string
}

// isLog reports whether path is one of the logs the page-out works on: a
// value-log (.vlog) or write-ahead-log (.mem) file directly in dir.
func isLog(dir, path string) bool {
	ext := filepath.Ext(path)
	return (ext == ".vlog" || ext == ".mem") && filepath.Dir(path) == dir
}

// logSpans reads a /proc/PID/maps listing and returns the mappings of the
// logs in dir (an absolute, clean path).
func logSpans(maps io.Reader, dir string) ([]span, error) {
	var out []span
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// address perms offset dev inode [path]; the path may hold
		// spaces, so it is what follows the fifth field.
		line := sc.Text()
		rest := line
		var fields [5]string
		for i := range fields {
			rest = strings.TrimLeft(rest, " ")
			n := strings.IndexByte(rest, ' ')
			if n < 0 {
				rest = ""
				break
			}
			fields[i], rest = rest[:n], rest[n:]
		}
		path := strings.TrimLeft(rest, " ")
		if path == "" || !isLog(dir, path) {
			continue // anonymous, deleted ("... (deleted)") or another file
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		out = append(out, span{start: uintptr(start), end: uintptr(end), path: path})
	}
	return out, sc.Err()
}

// statusBytes returns the value of a "Name: N kB" line of a /proc/PID/status
// listing in bytes, or -1 when it is not there.
func statusBytes(status io.Reader, name string) int64 {
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), name+":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return -1
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return -1
		}
		return n << 10
	}
	return -1
}
