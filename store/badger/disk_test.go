package badger

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestMapErr_NoSpaceIsErrNoSpace(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		fmt.Errorf("write: %w", syscall.ENOSPC),
		fmt.Errorf("write: %w", syscall.EDQUOT),
		// Badger flattens what it wraps into text.
		errors.New("cannot create mem table err: while opening file: 00005.mem err: no space left on device"),
	} {
		if got := mapErr(err); !errors.Is(got, engine.ErrNoSpace) {
			t.Errorf("mapErr(%q) = %v, want ErrNoSpace", err, got)
		}
	}
	if got := mapErr(errors.New("input/output error")); errors.Is(got, engine.ErrNoSpace) {
		t.Errorf("an I/O error became ErrNoSpace: %v", got)
	}
}

// crashCopy copies the files of an open store to a new directory, as a
// crash would leave them: the memtable log at its mapped size, its tail
// unwritten. Runs of zeros are left as holes, so the copy stays small.
func crashCopy(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 64<<10)
	for _, e := range entries {
		in, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(zero))
		var size int64
		for {
			n, err := io.ReadFull(in, buf)
			if n > 0 {
				if bytes.Equal(buf[:n], zero[:n]) {
					_, err = out.Seek(int64(n), io.SeekCurrent)
				} else {
					_, err = out.Write(buf[:n])
				}
				if err != nil {
					t.Fatal(err)
				}
				size += int64(n)
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := out.Truncate(size); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
	return to
}

func putWorkflows(t *testing.T, s engine.Store, n int) {
	t.Helper()
	err := s.Update(func(tx engine.Tx) error {
		for i := range n {
			if err := tx.PutWorkflow(&durablev1.WorkflowRecord{Info: &durablev1.WorkflowInfo{WorkflowId: "wf-" + strconv.Itoa(i)}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}

func countWorkflows(t *testing.T, s engine.Store) int {
	t.Helper()
	var n int
	err := s.View(func(tx engine.Tx) error {
		ws, err := tx.ListWorkflows("", 1000)
		n = len(ws)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStore_OpenReadOnlyAfterACrash: a store that a crash left with a
// memtable log at its mapped size opens read-only, serves what was
// committed, refuses writes, and opens for writing again afterwards.
func TestStore_OpenReadOnlyAfterACrash(t *testing.T) {
	t.Parallel()
	live := openDir(t, t.TempDir())
	putWorkflows(t, live, 50)
	dir := crashCopy(t, live.dir)
	mapped := int64(2 * badgerOptions("", Options{}).MemTableSize)
	logs := memLogSizes(t, dir)
	if len(logs) == 0 || logs[0] != mapped {
		t.Fatalf("the crashed copy has memtable logs of %v bytes, want one of %d", logs, mapped)
	}

	ro, err := OpenReadOnly(dir, Options{})
	if err != nil {
		t.Fatalf("read-only open after a crash: %v", err)
	}
	for _, n := range memLogSizes(t, dir) {
		if n >= mapped {
			t.Errorf("a memtable log was not cut at its last entry: %d bytes", n)
		}
	}
	if n := countWorkflows(t, ro); n != 50 {
		t.Errorf("%d workflows read-only, want 50", n)
	}
	err = ro.Update(func(tx engine.Tx) error {
		return tx.PutWorkflow(&durablev1.WorkflowRecord{Info: &durablev1.WorkflowInfo{WorkflowId: "late"}})
	})
	if !errors.Is(err, engine.ErrWritesRefused) {
		t.Errorf("update of a read-only store: %v, want ErrWritesRefused", err)
	}
	if err := ro.Sync(); err != nil {
		t.Errorf("sync of a read-only store: %v", err)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	rw := openDir(t, dir)
	if n := countWorkflows(t, rw); n != 50 {
		t.Errorf("%d workflows after reopening for writes, want 50", n)
	}
	putWorkflows(t, rw, 60)
	if n := countWorkflows(t, rw); n != 60 {
		t.Errorf("%d workflows after writing again, want 60", n)
	}
}

func TestStore_OpenReadOnlyWithoutAStoreFails(t *testing.T) {
	t.Parallel()
	if s, err := OpenReadOnly(t.TempDir(), Options{}); err == nil {
		s.Close()
		t.Fatal("a read-only open of an empty directory succeeded")
	}
}

func memLogSizes(t *testing.T, dir string) []int64 {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, p := range logs {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, info.Size())
	}
	return sizes
}
