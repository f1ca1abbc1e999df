package badger

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// BenchmarkGroupCommit measures durable commits per second: each op is an
// Update writing one small record followed by Sync, from many goroutines at
// once, on an on-disk store. Serial is the same from one goroutine, where
// every commit pays a whole fsync.
func BenchmarkGroupCommit(b *testing.B) {
	for _, bc := range []struct {
		name        string
		parallelism int
	}{
		{"Serial", 0},
		{"Writers64", 64},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var next atomic.Int64
			op := func() error {
				id := fmt.Sprint(next.Add(1))
				err := s.Update(func(tx engine.Tx) error {
					return tx.PutLatency(&durablev1.LatencyRecord{ActivityType: id, Attempts: 1, Buckets: []int64{1}})
				})
				if err != nil {
					return err
				}
				return s.Sync()
			}
			b.ResetTimer()
			if bc.parallelism == 0 {
				for range b.N {
					if err := op(); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(bc.parallelism)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := op(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}
