package postgres

import (
	"fmt"
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
func BenchmarkSharedLease(b *testing.B) {
	for _, mode := range []string{"Lease", "Claim", "ClaimNotify"} {
		b.Run(mode, func(b *testing.B) {
			dsn := testpg.Database(b)
			s, err := Open(dsn, Options{MaxConns: 4, Node: "a"})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if mode == "ClaimNotify" {
				other, err := Open(dsn, Options{MaxConns: 2, Node: "b"})
				if err != nil {
					b.Fatal(err)
				}
				defer other.Close()
				defer other.Listen(func(engine.Notice) {}, nil)()
			}
			for from := 0; from < b.N; from += 500 {
				err := s.Update(func(tx engine.Tx) error {
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
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				err := s.Update(func(tx engine.Tx) error {
					stx := tx.(engine.SharedTx)
					wf, id := "wf", fmt.Sprint(i)
					if mode != "Lease" {
						es, err := stx.ClaimQueued(engine.ActivityTask, "q", now, 1)
						if err != nil {
							return err
						}
						if len(es) != 1 {
							return fmt.Errorf("claimed %d entries, want 1", len(es))
						}
						wf, id = es[0].WorkflowID, es[0].ActivityID
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
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
