package badger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tinyllm/durable/engine"
)

// Free space on the data volume. Badger maps its memtable logs (.mem) and
// value log files into memory at their full size and writes into the
// mapping; a page the file system cannot back kills the process with SIGBUS,
// and no error reaches the caller. Checking the free space before it runs
// out, with a reserve that leaves room for what the store may still write
// once writes stop, is what keeps the daemon alive on a full disk. The rule
// (ShortOfSpace) is a pure function of a reading; the Monitor takes the
// readings and reports the changes.

// Reserve is how much of the data volume must stay free: Bytes, or, when
// Percent is above 0, that share of the volume's size.
type Reserve struct {
	Bytes   uint64
	Percent float64
}

// ParseReserve reads a reserve as a size ("256MiB", "1GiB", "500MB", "64M",
// or bytes) or a share of the volume ("5%"). K, M, G, T and their KiB, MiB,
// GiB, TiB spellings are powers of 1024; KB, MB, GB, TB powers of 1000.
func ParseReserve(s string) (Reserve, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(v) || v <= 0 || v >= 100 {
			return Reserve{}, fmt.Errorf("want a share of the volume between 0%% and 100%% such as 5%%, got %q", s)
		}
		return Reserve{Percent: v}, nil
	}
	n, err := ParseSize(t)
	if err != nil {
		return Reserve{}, err
	}
	return Reserve{Bytes: n}, nil
}

// sizeUnits are the suffixes ParseSize knows, longest first so that "MiB"
// is not read as "B".
var sizeUnits = []struct {
	suffix string
	mult   uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize reads a size in bytes with an optional unit (see ParseReserve).
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	mult := uint64(1)
	for _, u := range sizeUnits {
		if len(t) > len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v*float64(mult) >= 1<<63 {
		return 0, fmt.Errorf("want a size such as 256MiB, 1GiB or 500MB, or a share such as 5%%, got %q", s)
	}
	return uint64(v * float64(mult)), nil
}

// Of is the reserve on a volume of total bytes.
func (r Reserve) Of(total uint64) uint64 {
	if r.Percent > 0 {
		return uint64(float64(total) * r.Percent / 100)
	}
	return r.Bytes
}

func (r Reserve) String() string {
	if r.Percent > 0 {
		return strconv.FormatFloat(r.Percent, 'f', -1, 64) + "%"
	}
	return FormatSize(r.Bytes)
}

// FormatSize writes n bytes for people: "12.5 MiB", "256 MiB", "900 B".
// It rounds down, so that a figure just under a bound never reads as the
// bound itself ("255.9 MiB free, below the reserve of 256 MiB").
func FormatSize(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	v = math.Floor(v*10) / 10
	return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + " " + units[i:i+1] + "iB"
}

// ResumeMargin is how far above the reserve free space must come back
// before writes resume: a sixteenth of the reserve, at least 1 MiB and at
// most 64 MiB. Without it the state would flap while free space hovers at
// the reserve, as every admitted write takes a little of it again.
func ResumeMargin(reserve uint64) uint64 {
	return min(max(reserve/16, 1<<20), 64<<20)
}

// ShortOfSpace is the rule: whether writes must be refused after a reading
// of free and total bytes, given whether they were refused before it. They
// are refused once free space falls below the reserve, and allowed again
// once it is back at the reserve plus ResumeMargin.
func ShortOfSpace(wasShort bool, free, total uint64, r Reserve) bool {
	reserve := r.Of(total)
	if wasShort {
		return free < reserve+ResumeMargin(reserve)
	}
	return free < reserve
}

// Space is one reading of a volume: bytes free for the daemon to write and
// the volume's size.
type Space struct {
	Free, Total uint64
}

// DiskStatus is what a Monitor found at its last reading.
type DiskStatus struct {
	Space
	// Reserve is the reserve in bytes on this volume.
	Reserve uint64
	// Short is true while writes must be refused.
	Short bool
	// Dir is the data directory whose volume is read.
	Dir string
	// Err is why the last reading failed, if it did; the figures are then
	// those of the last good one.
	Err error
	// Advice is what the operator can do, for messages.
	Advice string
}

// Refusal is the error writes are refused with while s.Short: how much is
// free, the reserve, the data directory, and what to do. It wraps
// engine.ErrNoSpace.
func (s DiskStatus) Refusal() error {
	msg := fmt.Sprintf("%s free of %s on the volume of %s, below the disk reserve of %s: changes of state are refused until free space is back at %s (reads, Watch and polls go on)",
		FormatSize(s.Free), FormatSize(s.Total), s.Dir, FormatSize(s.Reserve), FormatSize(s.Reserve+ResumeMargin(s.Reserve)))
	if s.Advice != "" {
		msg += "; " + s.Advice
	}
	return fmt.Errorf("%w: %s", engine.ErrNoSpace, msg)
}

// PollInterval is how long the monitor waits before its next reading: a
// second, or a tenth of one while free space is within twice the reserve.
// A reading costs one statfs call. Writes faster than that are caught by
// the bytes they write (Monitor.Wrote).
func PollInterval(s DiskStatus) time.Duration {
	if s.Free < 2*s.Reserve {
		return 100 * time.Millisecond
	}
	return time.Second
}

// MonitorParams configure a Monitor.
type MonitorParams struct {
	// Dir is the data directory; its volume is the one read.
	Dir string
	// Reserve is what must stay free.
	Reserve Reserve
	// Advice ends every refusal's message: what the operator can do.
	Advice string
	// SpaceFunc reads the volume of a directory; default SpaceOf (statfs).
	SpaceFunc func(dir string) (Space, error)
	// ChangedFunc hears every reading after the first that changes Short,
	// or whether the volume could be read. The first reading reports
	// nothing: its caller acts on Check's result.
	ChangedFunc func(DiskStatus)
	// CheckedFunc hears every reading (for metrics).
	CheckedFunc func(DiskStatus)
}

// Monitor watches the free space of the data volume: Run reads it about
// once a second, and at once when the store has written a quarter of the
// room left above the reserve since the last reading (Wrote); Check reads
// it at once (after a failed write, say). Readings are serialized, and so
// are the reports of changes, in their order.
type Monitor struct {
	p       MonitorParams
	mu      sync.Mutex
	last    DiskStatus
	started bool

	// written counts the bytes written since the last reading; budget is
	// how many may be written before the next one is due.
	written atomic.Int64
	budget  atomic.Int64
	kick    chan struct{}
}

// minWriteBudget is the least Wrote lets through between two readings.
const minWriteBudget = 256 << 10

// writeBudget is how many bytes may be written after a reading before the
// next one: a quarter of the room above the reserve (a store writes its
// records once to its log, and later once more into a table, then frees
// the log), at least minWriteBudget. A burst of writes thus meets the
// reserve within a fraction of the room it had, however fast it is.
func writeBudget(s DiskStatus) int64 {
	if s.Free <= s.Reserve {
		return minWriteBudget
	}
	return max(int64(min((s.Free-s.Reserve)/4, 1<<62)), minWriteBudget)
}

// NewMonitor returns a Monitor that has not read anything yet.
func NewMonitor(p MonitorParams) *Monitor {
	if p.SpaceFunc == nil {
		p.SpaceFunc = SpaceOf
	}
	m := &Monitor{p: p, last: DiskStatus{Dir: p.Dir, Advice: p.Advice}, kick: make(chan struct{}, 1)}
	m.budget.Store(minWriteBudget)
	return m
}

// Wrote counts bytes the store wrote. Once they pass the budget of the last
// reading it asks Run for a reading now, and reports whether it did. It is
// cheap enough to call after every commit (Options.WroteFunc).
func (m *Monitor) Wrote(bytes int) bool {
	if m.written.Add(int64(bytes)) < m.budget.Load() {
		return false
	}
	select {
	case m.kick <- struct{}{}:
	default: // a reading is already asked for
	}
	return true
}

// Check reads the volume now, applies ShortOfSpace and reports what
// changed; it returns the new status. A failed reading keeps the state.
func (m *Monitor) Check() DiskStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.last
	m.written.Store(0)
	sp, err := m.p.SpaceFunc(m.p.Dir)
	s := prev
	s.Err = err
	if err == nil {
		s.Space = sp
		s.Reserve = m.p.Reserve.Of(sp.Total)
		s.Short = ShortOfSpace(prev.Short, sp.Free, sp.Total, m.p.Reserve)
	}
	m.last = s
	m.budget.Store(writeBudget(s))
	first := !m.started
	m.started = true
	if m.p.CheckedFunc != nil {
		m.p.CheckedFunc(s)
	}
	if !first && m.p.ChangedFunc != nil && (s.Short != prev.Short || (s.Err == nil) != (prev.Err == nil)) {
		m.p.ChangedFunc(s)
	}
	return s
}

// Status returns the last reading.
func (m *Monitor) Status() DiskStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Run reads the volume every PollInterval, and when Wrote asks, until ctx
// ends.
func (m *Monitor) Run(ctx context.Context) {
	t := time.NewTimer(PollInterval(m.Status()))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.kick:
		}
		t.Reset(PollInterval(m.Check()))
	}
}

// ErrSpaceUnknown: this platform has no way to read a volume's free space;
// the disk reserve is then not enforced.
var ErrSpaceUnknown = errors.New("free space cannot be read on this platform")
