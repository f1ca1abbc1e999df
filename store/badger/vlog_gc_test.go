package badger

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/tinyllm/durable/engine"
)

// vlogBytes is the size on disk of the value-log files in dir.
func vlogBytes(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil {
			t.Fatal(err)
		}
		n += st.Blocks * 512
	}
	return n
}

func TestValueLogGarbageIsCollected(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openDir(t, dir)
	// 100 activities whose 64 KiB inputs are written 24 times over: about
	// 150 MiB of value log, of which the last 6 MiB are live.
	const activities, rounds = 100, 24
	for round := range rounds {
		err := s.Update(func(tx engine.Tx) error {
			for i := range activities {
				a := newActivity("wf", fmt.Sprint(i), scheduled, 0, int64(round*activities+i))
				a.Input = make([]byte, 64<<10)
				rand.Read(a.Input)
				a.Input[0] = byte(round)
				if err := tx.PutActivity(a); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Closing flushes the memtable into a table of level 0, and from
		// six tables there, compacting them into the next level drops
		// the old versions, which tells Badger what of the log is garbage.
		if round%4 == 3 {
			s = reopenDisk(t, s).(*Store)
		}
	}
	if err := s.db.Flatten(2); err != nil {
		t.Fatal(err)
	}
	before := vlogBytes(t, dir)
	n, err := collectOnce(s.db, nil)
	if err != nil {
		t.Fatalf("collectOnce: %v", err)
	}
	after := vlogBytes(t, dir)
	if n == 0 || after > before/2 {
		t.Errorf("garbage collection rewrote %d files: value log %d bytes before, %d after; want at least one and half gone", n, before, after)
	}
	s = reopenDisk(t, s).(*Store)
	err = s.View(func(tx engine.Tx) error {
		for i := range activities {
			a, err := tx.GetActivity("wf", fmt.Sprint(i))
			if err != nil {
				return err
			}
			if len(a.GetInput()) != 64<<10 || a.GetInput()[0] != rounds-1 {
				return fmt.Errorf("activity %d: input of %d bytes from round %d, want 64 KiB from the last", i, len(a.GetInput()), a.GetInput()[0])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
