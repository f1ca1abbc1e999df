package badger

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
)

const mib = 1 << 20

func TestParseReserve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Reserve
	}{
		{"256MiB", Reserve{Bytes: 256 * mib}},
		{"256M", Reserve{Bytes: 256 * mib}},
		{"256 mib", Reserve{Bytes: 256 * mib}},
		{"1GiB", Reserve{Bytes: 1 << 30}},
		{"1.5G", Reserve{Bytes: 3 << 29}},
		{"500MB", Reserve{Bytes: 500e6}},
		{"64KiB", Reserve{Bytes: 64 << 10}},
		{"1048576", Reserve{Bytes: 1 << 20}},
		{"100B", Reserve{Bytes: 100}},
		{"0", Reserve{}},
		{"5%", Reserve{Percent: 5}},
		{"2.5 %", Reserve{Percent: 2.5}},
	} {
		got, err := ParseReserve(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseReserve(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "-1", "lots", "5 parsecs", "0%", "100%", "-3%", "NaN%", "1e30GiB", "MiB"} {
		if got, err := ParseReserve(bad); err == nil {
			t.Errorf("ParseReserve(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestReserve_Of(t *testing.T) {
	t.Parallel()
	if got := (Reserve{Bytes: 10 * mib}).Of(1 << 40); got != 10*mib {
		t.Errorf("a byte reserve depends on the volume: %d", got)
	}
	if got := (Reserve{Percent: 5}).Of(1000 * mib); got != 50*mib {
		t.Errorf("5%% of 1000 MiB = %d, want 50 MiB", got)
	}
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint64]string{
		0: "0 B", 900: "900 B", 1024: "1 KiB", 1536: "1.5 KiB", 256 * mib: "256 MiB",
		12*mib + mib/2: "12.5 MiB", 3 << 30: "3 GiB", 5 << 40: "5 TiB", 256*mib - 4096: "255.9 MiB",
	} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestShortOfSpace is the rule: refuse below the reserve, resume only at
// the reserve plus the margin.
func TestShortOfSpace(t *testing.T) {
	t.Parallel()
	const total = 10 << 30
	r := Reserve{Bytes: 256 * mib}
	margin := ResumeMargin(256 * mib) // 16 MiB
	if margin != 16*mib {
		t.Fatalf("ResumeMargin(256 MiB) = %d, want 16 MiB", margin)
	}
	for _, tc := range []struct {
		name     string
		wasShort bool
		free     uint64
		want     bool
	}{
		{"PlentyFree", false, 1 << 30, false},
		{"AtTheReserve", false, 256 * mib, false},
		{"JustBelowTheReserve", false, 256*mib - 1, true},
		{"EmptyVolume", false, 0, true},
		{"ShortAndStillBelow", true, 200 * mib, true},
		{"ShortAndBackAtTheReserve", true, 256 * mib, true},
		{"ShortAndJustUnderTheMargin", true, 256*mib + margin - 1, true},
		{"ShortAndPastTheMargin", true, 256*mib + margin, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShortOfSpace(tc.wasShort, tc.free, total, r); got != tc.want {
				t.Errorf("ShortOfSpace(%v, %d) = %v, want %v", tc.wasShort, tc.free, got, tc.want)
			}
		})
	}
	// A share is of the volume's size.
	if !ShortOfSpace(false, 49*mib, 1000*mib, Reserve{Percent: 5}) || ShortOfSpace(false, 50*mib, 1000*mib, Reserve{Percent: 5}) {
		t.Error("a 5% reserve on 1000 MiB is not 50 MiB")
	}
	// The margin is bounded both ways.
	if ResumeMargin(0) != mib || ResumeMargin(100<<30) != 64*mib {
		t.Errorf("ResumeMargin bounds: %d, %d", ResumeMargin(0), ResumeMargin(100<<30))
	}
}

// fakeVolume is a volume whose free space the test sets.
type fakeVolume struct {
	space Space
	err   error
}

func (v *fakeVolume) read(string) (Space, error) { return v.space, v.err }

func TestMonitor_ReportsChangesAfterTheFirstReading(t *testing.T) {
	t.Parallel()
	vol := &fakeVolume{space: Space{Free: 100 * mib, Total: 1 << 30}}
	var changes, checks []DiskStatus
	m := NewMonitor(MonitorParams{
		Dir: "/data", Reserve: Reserve{Bytes: 64 * mib}, SpaceFunc: vol.read, Advice: "free space",
		ChangedFunc: func(s DiskStatus) { changes = append(changes, s) },
		CheckedFunc: func(s DiskStatus) { checks = append(checks, s) },
	})
	if s := m.Check(); s.Short || s.Free != 100*mib || s.Reserve != 64*mib {
		t.Fatalf("first reading: %+v", s)
	}
	vol.space.Free = 63 * mib
	if s := m.Check(); !s.Short {
		t.Fatalf("below the reserve: %+v", s)
	}
	vol.space.Free = 66 * mib // back above the reserve, not past the margin (4 MiB)
	if s := m.Check(); !s.Short {
		t.Fatalf("within the margin: %+v", s)
	}
	vol.err = errors.New("stale file handle")
	if s := m.Check(); !s.Short || s.Err == nil || s.Free != 66*mib {
		t.Fatalf("a failed reading must keep the state and the last figures: %+v", s)
	}
	vol.err = nil
	vol.space.Free = 81 * mib
	if s := m.Check(); s.Short || s.Err != nil {
		t.Fatalf("past the margin: %+v", s)
	}
	if len(checks) != 5 {
		t.Errorf("CheckedFunc heard %d readings, want 5", len(checks))
	}
	// short, unreadable, readable, not short: the last two in one reading.
	if len(changes) != 3 || !changes[0].Short || changes[1].Err == nil || changes[2].Short || changes[2].Err != nil {
		t.Errorf("ChangedFunc heard %+v", changes)
	}
	if m.Status().Free != 81*mib {
		t.Errorf("Status = %+v", m.Status())
	}
}

func TestMonitor_FirstReadingShortIsNotReported(t *testing.T) {
	t.Parallel()
	vol := &fakeVolume{space: Space{Free: mib, Total: 1 << 30}}
	reported := 0
	m := NewMonitor(MonitorParams{Dir: "/data", Reserve: Reserve{Bytes: 64 * mib}, SpaceFunc: vol.read,
		ChangedFunc: func(DiskStatus) { reported++ }})
	if s := m.Check(); !s.Short {
		t.Fatalf("first reading: %+v", s)
	}
	if reported != 0 {
		t.Errorf("the first reading was reported")
	}
}

func TestDiskStatus_RefusalSaysWhatIsFreeAndWhatToDo(t *testing.T) {
	t.Parallel()
	s := DiskStatus{Space: Space{Free: 12*mib + mib/2, Total: 1 << 30}, Reserve: 256 * mib, Short: true,
		Dir: "/var/lib/durable", Advice: "free space on that volume, or lower --disk-reserve at your own risk"}
	err := s.Refusal()
	if !errors.Is(err, engine.ErrNoSpace) {
		t.Errorf("the refusal does not wrap ErrNoSpace: %v", err)
	}
	for _, want := range []string{"12.5 MiB free", "1 GiB", "/var/lib/durable", "reserve of 256 MiB", "back at 272 MiB", "lower --disk-reserve"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}

func TestPollInterval(t *testing.T) {
	t.Parallel()
	if d := PollInterval(DiskStatus{Space: Space{Free: 10 << 30}, Reserve: 256 * mib}); d != time.Second {
		t.Errorf("far from the reserve: %s", d)
	}
	if d := PollInterval(DiskStatus{Space: Space{Free: 500 * mib}, Reserve: 256 * mib}); d != 100*time.Millisecond {
		t.Errorf("within twice the reserve: %s", d)
	}
}

// TestDefaultReserve: the default is 256 MiB, or what the store's options
// need when that is more.
func TestDefaultReserve(t *testing.T) {
	t.Parallel()
	opts := Options{}
	bo := badgerOptions("", opts)
	largest := uint64(max(2*bo.MemTableSize, 2*bo.ValueLogFileSize))
	if LargestMappedFile(opts) != largest {
		t.Errorf("LargestMappedFile = %d, want %d (the larger of the two mappings)", LargestMappedFile(opts), largest)
	}
	if MinReserve(opts) != 2*largest {
		t.Errorf("MinReserve = %d, want %d", MinReserve(opts), 2*largest)
	}
	if got := DefaultReserve(opts).Bytes; got != max(256*mib, 2*largest) {
		t.Errorf("DefaultReserve = %d", got)
	}
}

// TestMonitor_WroteAsksForAReadingOnceAQuarterOfTheRoomIsWritten: however
// fast writes come, a reading is due after a quarter of the room above the
// reserve, and the count starts again with each reading.
func TestMonitor_WroteAsksForAReadingOnceAQuarterOfTheRoomIsWritten(t *testing.T) {
	t.Parallel()
	vol := &fakeVolume{space: Space{Free: 100 * mib, Total: 1 << 30}}
	m := NewMonitor(MonitorParams{Dir: "/data", Reserve: Reserve{Bytes: 60 * mib}, SpaceFunc: vol.read})
	m.Check() // 40 MiB of room: a budget of 10 MiB
	if m.Wrote(6*mib) || m.Wrote(4*mib-1) {
		t.Fatal("a reading was asked for before 10 MiB were written")
	}
	if !m.Wrote(1) {
		t.Fatal("no reading asked for after 10 MiB")
	}
	vol.space.Free = 64 * mib
	m.Check() // 4 MiB of room: a budget of 1 MiB
	if m.Wrote(mib-1) || !m.Wrote(1) {
		t.Fatal("the budget did not shrink with the room")
	}
	vol.space.Free = 50 * mib
	m.Check() // short: the least budget
	if m.Wrote(minWriteBudget-1) || !m.Wrote(1) {
		t.Fatal("below the reserve the budget is not the least one")
	}
}

// BenchmarkSpaceOf is the cost of one reading of the volume (a statfs).
func BenchmarkSpaceOf(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := SpaceOf(dir); err != nil {
			b.Fatal(err)
		}
	}
}
