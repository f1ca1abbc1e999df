//go:build linux

package badger

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
)

// residentLogs is how much of the logs in dir is resident in this process,
// from /proc/self/smaps.
func residentLogs(t *testing.T, dir string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	inLog := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if spans, _ := logSpans(strings.NewReader(line), dir); len(spans) == 1 {
			inLog = true
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok {
			if inLog {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				n += kb << 10
			}
			inLog = false
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// writePayloads commits n activities with 64 KiB of random input each and
// syncs them.
func writePayloads(t *testing.T, s *Store, n int) {
	t.Helper()
	for i := range n {
		a := newActivity("wf", fmt.Sprint(i), scheduled, 0, int64(i))
		a.Input = make([]byte, 64<<10)
		rand.Read(a.Input)
		if err := s.Update(func(tx engine.Tx) error { return tx.PutActivity(a) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}

func TestPageOutReclaimsTheResidentPagesOfTheLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mem, err := MemoryFor(DefaultMemoryBudget)
	if err != nil {
		t.Fatal(err)
	}
	mem.MappedLogs = 1 << 50 // the store's own page-out never acts
	s, err := Open(dir, Options{Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writePayloads(t, s, 512) // 32 MiB
	before := residentLogs(t, dir)
	if before < 16<<20 {
		t.Fatalf("%d bytes of the logs resident after writing 32 MiB of payloads, want at least 16 MiB", before)
	}
	p := &pager{dir: dir}
	if err := p.pageOut(); err != nil {
		t.Fatalf("pageOut: %v", err)
	}
	if after := residentLogs(t, dir); after > before/4 {
		t.Errorf("%d bytes of the logs resident after the page-out, %d before; want at most a quarter", after, before)
	}
	// What was paged out is read back intact.
	err = s.View(func(tx engine.Tx) error {
		for i := range 512 {
			a, err := tx.GetActivity("wf", fmt.Sprint(i))
			if err != nil {
				return err
			}
			if len(a.GetInput()) != 64<<10 {
				return fmt.Errorf("activity %d: input of %d bytes, want 64 KiB", i, len(a.GetInput()))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestStoreKeepsItsMappedLogsUnderTheLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mem, err := MemoryFor(DefaultMemoryBudget)
	if err != nil {
		t.Fatal(err)
	}
	mem.MappedLogs = 1 // always over: every look pages out
	s, err := Open(dir, Options{Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writePayloads(t, s, 512)
	abs, _ := filepath.Abs(dir)
	deadline := time.Now().Add(10 * time.Second)
	for residentLogs(t, abs) > 4<<20 {
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes of the logs still resident 10s after writing them, want at most 4 MiB", residentLogs(t, abs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
