package badger

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// BenchmarkAttemptTrailOnDisk measures what keeping finished activities
// costs on disk. It runs trailActivities activities through the engine on
// an on-disk store, each failing attempts-1 times with a realistic failure
// before it completes, closes the store and copies its directory. In one
// copy it drops every key but the finished records (0x70, 0x71), in the
// other only those, and reads the size of Badger's tables in each: what the
// trail takes, compressed as the daemon stores it, and what the rest of the
// same data takes. Dropping a prefix rewrites the tables, so neither side
// counts the deleted records and index entries that a compaction has not
// yet removed. Run it with -benchtime=1x: each iteration is one workload.
//
//	go test ./store/badger -run '^$' -bench AttemptTrailOnDisk -benchtime=1x
func BenchmarkAttemptTrailOnDisk(b *testing.B) {
	for _, attempts := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("Attempts%d", attempts), func(b *testing.B) {
			for range b.N {
				c := measureTrail(b, attempts)
				n := float64(trailActivities * attempts)
				b.ReportMetric(float64(c.trail)/n, "disk-bytes/attempt")
				b.ReportMetric(float64(c.trail)/trailActivities, "disk-bytes/activity")
				b.ReportMetric(float64(c.logical)/n, "logical-bytes/attempt")
				b.Logf("%d activities × %d attempts: the trail's tables take %d B, the rest of the data %d B; finished records are %d B of keys and values",
					trailActivities, attempts, c.trail, c.rest, c.logical)
			}
		})
	}
}

// trailActivities is how many activities one measurement runs.
const trailActivities = 2000

type trailCost struct {
	// trail and rest are the table sizes of the finished records and of
	// everything else.
	trail, rest int64
	// logical is the bytes of the finished records' keys and values.
	logical int64
}

func measureTrail(b *testing.B, attempts int) trailCost {
	b.Helper()
	dir := b.TempDir()
	// Without sync: the sizes are the same, the run is minutes shorter.
	s, err := Open(dir, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	clock := engine.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e, err := engine.New(s, engine.Options{Clock: clock, Jitter: func(d time.Duration) time.Duration { return d }})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel() // polls look once and never wait
	for i := range trailActivities {
		id := fmt.Sprintf("order-%06d", i)
		if _, err := e.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "Checkout", TaskQueue: "wf", Input: []byte(`{"order":42}`)}); err != nil {
			b.Fatal(err)
		}
		wt, err := e.PollWorkflowTask(done, &durablev1.PollWorkflowTaskRequest{TaskQueue: "wf", Identity: "worker-7f3a@host-12"})
		if err != nil || len(wt.GetTaskToken()) == 0 {
			b.Fatalf("poll workflow task: %v", err)
		}
		_, err = e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: []*durablev1.Command{{
			Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: "charge", ActivityType: "ChargeCard", Input: []byte(`{"amount":4200}`),
			ActivityOptions: &durablev1.ActivityOptions{TaskQueue: "pay", StartToCloseTimeout: durationpb.New(time.Minute),
				RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1, MaxIntervalMs: 1, MaxAttempts: int32(attempts + 1)}},
		}}})
		if err != nil {
			b.Fatal(err)
		}
	}
	for attempt := 1; attempt <= attempts; attempt++ {
		for left := trailActivities; left > 0; {
			resp, err := e.PollActivityTask(done, &durablev1.PollActivityTaskRequest{TaskQueue: "pay", Identity: "worker-7f3a@host-12", MaxTasks: 100})
			if err != nil {
				b.Fatal(err)
			}
			if len(resp.GetTasks()) == 0 {
				b.Fatalf("attempt %d: %d activities not handed out", attempt, left)
			}
			for _, task := range resp.GetTasks() {
				if attempt < attempts {
					_, err = e.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: &durablev1.Failure{
						Type: "Unavailable", Message: fmt.Sprintf("dial tcp 10.0.%d.%d:5432: connect: connection refused", left%250, attempt),
					}})
				} else {
					_, err = e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken(), Result: []byte(`{"charged":true}`)})
				}
				if err != nil {
					b.Fatal(err)
				}
				left--
			}
		}
		clock.Advance(10 * time.Millisecond)
	}
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	var c trailCost
	err = s.View(func(etx engine.Tx) error {
		for _, p := range []byte{prefixFinished, prefixFinishedTime} {
			err := etx.(*tx).each([]byte{p}, func(k, v []byte) (bool, error) {
				c.logical += int64(len(k) + len(v))
				return true, nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	copied := b.TempDir()
	if err := os.CopyFS(copied, os.DirFS(dir)); err != nil {
		b.Fatal(err)
	}
	trail := [][]byte{{prefixFinished}, {prefixFinishedTime}}
	var others [][]byte
	for p := range 256 {
		if p != int(prefixFinished) && p != int(prefixFinishedTime) {
			others = append(others, []byte{byte(p)})
		}
	}
	c.trail = sizeWithout(b, dir, others)
	c.rest = sizeWithout(b, copied, trail)
	return c
}

// sizeWithout opens the store in dir with Badger alone, drops the keys
// under prefixes, compacts what is left into one level and returns the size
// of its tables.
func sizeWithout(b *testing.B, dir string, prefixes [][]byte) int64 {
	b.Helper()
	db, err := badgerdb.Open(badgerdb.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := db.DropPrefix(prefixes...); err != nil {
		b.Fatal(err)
	}
	if err := db.Flatten(2); err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, t := range db.Tables() {
		n += int64(t.OnDiskSize)
	}
	return n
}
