package postgres

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	"github.com/tinyllm/durable/store/storetest"
)

// BenchmarkSharedLease measures one lease transaction as a node leases a
// task: the activity read and written back as started (which moves its
// queue entry to a lease timer), one per Update.
//
//   - Lease: the activity named, as the embedded runtime knows it from its
//     heap (the baseline);
//   - Claim: the entry claimed first with ClaimQueued (FOR UPDATE SKIP
//     LOCKED), as the shared runtime does;
//   - ClaimNotify: and a notice naming the activity sent at commit, with
//     another store listening.
//
// Workers=1 runs the transactions one after another on one store;
// Workers=8 runs eight goroutines on two stores (two nodes) at once, all
// leasing from one queue, which shows what the transactions cost one
// another: those PostgreSQL aborts for a serialization failure run again
// (retries/op; gaveup counts the leases that still failed after Update's
// attempts), and the transactions that notify commit one at a time
// (PostgreSQL holds a lock from queueing the notifications to the end of
// the commit, its flush included).
func BenchmarkSharedLease(b *testing.B) {
	for _, workers := range []int{1, 8} {
		for _, mode := range []string{"Lease", "Claim", "ClaimNotify"} {
			if workers > 1 && mode == "Lease" {
				continue // the baseline names its activities: no claim to contend on
			}
			b.Run(fmt.Sprintf("%s/Workers=%d", mode, workers), func(b *testing.B) {
				benchLease(b, mode, workers)
			})
		}
	}
}

func benchLease(b *testing.B, mode string, workers int) {
	dsn := testpg.Database(b)
	var stores []*Store
	for i := range min(workers, 2) {
		s, err := Open(dsn, Options{MaxConns: int32(workers), Node: fmt.Sprint("bench-", i)})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	if mode == "ClaimNotify" {
		other, err := Open(dsn, Options{MaxConns: 2, Node: "listener"})
		if err != nil {
			b.Fatal(err)
		}
		defer other.Close()
		defer other.Listen(func(engine.Notice) {}, nil)()
	}
	for from := 0; from < b.N; from += 500 {
		err := stores[0].Update(func(tx engine.Tx) error {
			for i := from; i < min(from+500, b.N); i++ {
				a := storetest.NewActivity("wf", fmt.Sprint(i), scheduled, time.Duration(i), int64(i+1))
				if err := tx.PutActivity(a); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	now := storetest.T0.Add(time.Hour)
	var next, attempts, gaveUp atomic.Int64
	lease := func(s *Store) error {
		i := next.Add(1) - 1
		return s.Update(func(tx engine.Tx) error {
			attempts.Add(1)
			stx := tx.(engine.SharedTx)
			wf, id := "wf", fmt.Sprint(i)
			if mode != "Lease" {
				got, err := stx.ClaimQueued(engine.ActivityTask, "q", now, 1)
				if err != nil || len(got.Entries) == 0 {
					return err
				}
				wf, id = got.Entries[0].WorkflowID, got.Entries[0].ActivityID
			}
			a, err := tx.GetActivity(wf, id)
			if err != nil {
				return err
			}
			a.Info.State = started
			a.Info.NextAttemptTime = nil
			a.Info.LeaseDeadline = timestamppb.New(storetest.T0.Add(2 * time.Hour))
			if err := tx.PutActivity(a); err != nil {
				return err
			}
			if mode == "ClaimNotify" {
				return stx.Notify(engine.Notice{Activities: []engine.ActivityKey{{WorkflowID: wf, ActivityID: id}}})
			}
			return nil
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for next.Load() < int64(b.N) {
				if err := lease(s); err != nil {
					if retryable(err) {
						gaveUp.Add(1)
						continue
					}
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(attempts.Load()-next.Load())/float64(next.Load()), "retries/op")
	b.ReportMetric(float64(gaveUp.Load()), "gaveup")
}
