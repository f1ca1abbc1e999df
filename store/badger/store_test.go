package badger

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// openMemory returns an empty in-memory store closed when the test ends.
func openMemory(t *testing.T) engine.Store {
	t.Helper()
	s, err := Open("", Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openDisk returns an empty on-disk store closed when the test ends.
func openDisk(t *testing.T) engine.Store {
	t.Helper()
	return openDir(t, t.TempDir())
}

func openDir(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// reopenDisk closes s and opens its directory again.
func reopenDisk(t *testing.T, s engine.Store) engine.Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return openDir(t, s.(*Store).dir)
}

func TestStore_UpdateRetriesConflicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		conflicts int // how many attempts a concurrent writer spoils
		wantCalls int
		wantErr   error
		wantCount int64
	}{
		{"OneConflict", 1, 2, nil, 101},
		{"NineConflicts", 9, 10, nil, 901},
		{"AlwaysConflicting", 1000, maxConflictAttempts, badgerdb.ErrConflict, maxConflictAttempts * 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openMemory(t)
			calls := 0
			err := s.Update(func(tx engine.Tx) error {
				calls++
				n, err := tx.Counter()
				if err != nil {
					return err
				}
				if calls <= tt.conflicts {
					// Another transaction commits a change to what this one read.
					if err := s.Update(func(tx engine.Tx) error { return tx.SetCounter(n + 100) }); err != nil {
						return err
					}
				}
				return tx.SetCounter(n + 1)
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Update = %v, want %v", err, tt.wantErr)
			}
			if calls != tt.wantCalls {
				t.Errorf("fn ran %d times, want %d", calls, tt.wantCalls)
			}
			s.View(func(tx engine.Tx) error {
				if n, _ := tx.Counter(); n != tt.wantCount {
					t.Errorf("counter = %d, want %d", n, tt.wantCount)
				}
				return nil
			})
		})
	}
}

func TestStore_TooBigTransactionFails(t *testing.T) {
	t.Parallel()
	s := openMemory(t)
	big := bytes.Repeat([]byte("x"), 512<<10)
	err := s.Update(func(tx engine.Tx) error {
		for i := range 20 {
			a := newActivity("wf", fmt.Sprint(i), scheduled, 0, int64(i))
			a.Input = big
			if err := tx.PutActivity(a); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, badgerdb.ErrTxnTooBig) {
		t.Fatalf("Update of 10 MiB = %v, want ErrTxnTooBig", err)
	}
	s.View(func(tx engine.Tx) error {
		if as, _ := tx.Activities("wf"); len(as) != 0 {
			t.Errorf("a failed big transaction left %d activities", len(as))
		}
		return nil
	})
}

// TestStore_ConcurrentUpdatesAndSyncs runs writers that each commit their own
// records, bump the shared counter and Sync, as the engine does. No update may
// be lost: the counter equals the number of successful updates.
func TestStore_ConcurrentUpdatesAndSyncs(t *testing.T) {
	t.Parallel()
	s := openDisk(t)
	const writers, each = 8, 25
	var (
		mu        sync.Mutex
		succeeded int64
		wg        sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := s.Update(func(tx engine.Tx) error {
					n, err := tx.Counter()
					if err != nil {
						return err
					}
					a := newActivity(fmt.Sprintf("wf-%d", w), fmt.Sprint(i), scheduled, time.Duration(i)*time.Second, n)
					if err := tx.PutActivity(a); err != nil {
						return err
					}
					return tx.SetCounter(n + 1)
				})
				if errors.Is(err, badgerdb.ErrConflict) {
					continue // bounded retries ran out under contention
				}
				if err != nil {
					t.Errorf("update: %v", err)
					return
				}
				if err := s.Sync(); err != nil {
					t.Errorf("sync: %v", err)
					return
				}
				mu.Lock()
				succeeded++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s = reopenDisk(t, s)
	s.View(func(tx engine.Tx) error {
		n, err := tx.Counter()
		if err != nil || n != succeeded {
			t.Errorf("counter = %d, %v; want %d successful updates", n, err, succeeded)
		}
		count := 0
		tx.ScanActivities(func(*durablev1.ActivityRecord) bool { count++; return true })
		if int64(count) != succeeded {
			t.Errorf("%d activities, want %d", count, succeeded)
		}
		return nil
	})
	checkIndexes(t, s.(*Store))
}
