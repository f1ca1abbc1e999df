//go:build linux

package badger

import (
	"errors"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// pageOutEvery is how often the page-out looks at the resident set. At the
// rate a busy daemon writes its value log (tens of MB a second) the mapped
// pages overshoot the limit by a few MB between looks; reading the status
// costs microseconds.
const pageOutEvery = 250 * time.Millisecond

// pager keeps the resident pages of the mapped logs under a limit.
type pager struct {
	dir    string // absolute
	limit  int64
	logger *slog.Logger
	stop   chan struct{}
	done   chan struct{}
}

// startPageOut starts the page-out of the logs in dir above limit bytes of
// resident mapped-file pages; the returned function stops it.
func startPageOut(dir string, limit int64, logger *slog.Logger) (stop func()) {
	p := &pager{dir: dir, limit: limit, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return func() {
		close(p.stop)
		<-p.done
	}
}

func (p *pager) loop() {
	defer close(p.done)
	t := time.NewTicker(pageOutEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.stop:
			return
		}
		if p.resident() <= p.limit {
			continue
		}
		if err := p.pageOut(); err != nil {
			p.logger.Warn("cannot ask the kernel to reclaim the pages of the store's logs; they stay resident until memory is short",
				"err", err)
			return
		}
	}
}

// resident is the process's resident mapped-file pages (RssFile), which
// beside the logs counts the daemon's own binary and the LSM tables.
func (p *pager) resident() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	return statusBytes(f, "RssFile")
}

// pageOut asks the kernel to reclaim the pages of every mapped log. A log
// that Badger unmaps meanwhile is skipped (ENOMEM); a kernel without
// MADV_PAGEOUT (before Linux 5.4) is an error.
func (p *pager) pageOut() error {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return err
	}
	spans, err := logSpans(f, p.dir)
	f.Close()
	if err != nil {
		return err
	}
	for _, s := range spans {
		_, _, errno := unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_PAGEOUT)
		switch {
		case errno == 0, errors.Is(errno, unix.ENOMEM), errors.Is(errno, unix.EAGAIN):
		default:
			return errno
		}
	}
	return nil
}
