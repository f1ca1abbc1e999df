package soak

import (
	"sync"
	"time"
)

// rssSampler reads one durabled's resident set every 100 ms while it runs,
// keeping the largest value and the last; the kernel's own high-water mark
// (readHWM) is read too where the platform has one, so a peak between two
// samples is not missed.
type rssSampler struct {
	pid  int
	quit chan struct{}
	done chan struct{}

	mu         sync.Mutex
	max, last  int64
	samples    int
	unreadable error
}

func startRSSSampler(pid int) *rssSampler {
	s := &rssSampler{pid: pid, quit: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *rssSampler) loop() {
	defer close(s.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		rss, err := readRSS(s.pid)
		s.mu.Lock()
		if err != nil {
			s.unreadable = err
		} else {
			s.max, s.last = max(s.max, rss), rss
			s.samples++
		}
		s.mu.Unlock()
		select {
		case <-tick.C:
		case <-s.quit:
			return
		}
	}
}

// stop ends the sampling; safe to call more than once.
func (s *rssSampler) stop() {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
}

func (s *rssSampler) peak() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

func (s *rssSampler) current() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples == 0 {
		return 0, s.unreadable
	}
	return s.last, nil
}
