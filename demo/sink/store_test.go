package sink

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func setup(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func TestStore_ApplyCountsEveryDeliveryAndAppliesOnce(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	ctx := context.Background()
	for i, tc := range []struct {
		key     string
		applied bool
		count   int
	}{
		{"wf/1", true, 1},
		{"wf/2", true, 1},
		{"wf/1", false, 2},
		{"wf/1", false, 3},
		{"wf/3/0", true, 1},
	} {
		d, err := s.Apply(ctx, tc.key)
		if err != nil {
			t.Fatal(err)
		}
		if d.Applied != tc.applied || d.Count != tc.count {
			t.Errorf("delivery %d of %s = %+v, want applied=%v count=%d", i, tc.key, d, tc.applied, tc.count)
		}
	}
	if got, want := s.Stats(), (Stats{Applied: 3, Deliveries: 5, Duplicates: 2}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	if got := s.Duplicates(); !slices.Equal(got, []string{"wf/1"}) {
		t.Errorf("Duplicates = %v", got)
	}
	if got := s.Counts("wf/3"); len(got) != 1 || got["wf/3/0"] != 1 {
		t.Errorf("Counts(wf/3) = %v", got)
	}
}

func TestStore_ReopenReplaysLogAndCutsTornTail(t *testing.T) {
	t.Parallel()
	s, dir := setup(t)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "a", "key with\nnewline"} {
		if _, err := s.Apply(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	f, err := os.OpenFile(filepath.Join(dir, logName), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`"torn`) // a write cut short by a crash
	f.Close()

	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got, want := s2.Stats(), (Stats{Applied: 3, Deliveries: 4, Duplicates: 1}); got != want {
		t.Errorf("after reopen Stats = %+v, want %+v", got, want)
	}
	d, err := s2.Apply(ctx, "c")
	if err != nil || !d.Applied {
		t.Fatalf("Apply after reopen = %+v, %v", d, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, logName))
	if strings.Contains(string(b), "torn") {
		t.Errorf("torn tail survived: %q", b)
	}
}

func TestStore_SecondOpenOfADirFails(t *testing.T) {
	t.Parallel()
	_, dir := setup(t)
	if s, err := Open(dir); err == nil {
		s.Close()
		t.Fatal("second Open of a held directory succeeded")
	}
}

func TestServer_ConcurrentRemoteDeliveriesApplyOnce(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	var hooked sync.Map
	srv := httptest.NewServer(&Server{Store: s, AfterApplyFunc: func(d Delivery, pid int) {
		hooked.Store(d.Key, pid)
	}})
	defer srv.Close()
	c := NewClient(strings.TrimPrefix(srv.URL, "http://"))
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for _, k := range []string{"x", "y", "z"} {
				if _, err := c.Apply(ctx, k); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stats{Applied: 3, Deliveries: 24, Duplicates: 21}); st != want {
		t.Errorf("Stats = %+v, want %+v", st, want)
	}
	if pid, ok := hooked.Load("x"); !ok || pid.(int) != os.Getpid() {
		t.Errorf("AfterApplyFunc saw pid %v for x, want %d", pid, os.Getpid())
	}
}
