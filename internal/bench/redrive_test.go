package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// BenchmarkRedriveRate measures how close a redrive operation comes to the
// rate it was asked for: each run dead-letters the letters on a fresh
// durabled (the real binary, on disk, fsync on), starts one operation on
// all of them and waits for it; the rate is the letters released divided by
// the time between the operation's start and finish, as the daemon
// recorded them. Each run is one b.N; the median of the runs and the
// spread (lowest, highest) are reported, and the ratio to the requested
// rate. An operation releases its first letter at once, so at rate r, n
// letters take (n-1)/r and the ideal figure is r·n/(n-1), a shade above r.
// The last case asks for more than the daemon can do, to show its ceiling.
//
//	go test -run '^$' -bench RedriveRate -benchtime 5x ./internal/bench
func BenchmarkRedriveRate(b *testing.B) {
	for _, c := range []struct {
		rate    float64
		letters int
	}{{50, 1000}, {500, 1000}, {500, 5000}, {5000, 5000}, {100000, 5000}} {
		b.Run(fmt.Sprintf("%g_per_s/%d_letters", c.rate, c.letters), func(b *testing.B) {
			var rates []float64
			for run := range b.N {
				rates = append(rates, redriveRun(b, run, c.rate, c.letters))
			}
			slices.Sort(rates)
			median := rates[len(rates)/2]
			if len(rates)%2 == 0 {
				median = (rates[len(rates)/2-1] + rates[len(rates)/2]) / 2
			}
			b.ReportMetric(median, "letters/s")
			b.ReportMetric(median/c.rate, "of-requested")
			b.ReportMetric(rates[0], "lowest-letters/s")
			b.ReportMetric(rates[len(rates)-1], "highest-letters/s")
			b.Logf("%d runs at %g/s of %d letters: %v letters/s", len(rates), c.rate, c.letters, rates)
		})
	}
}

// redriveRun is one run: a fresh daemon, n letters, one operation at rate;
// it returns the released letters per second the daemon recorded.
func redriveRun(b *testing.B, run int, rate float64, n int) float64 {
	b.StopTimer()
	d := testdaemon.Exec(b, b.TempDir())
	defer d.Kill()
	conn, err := grpc.NewClient(d.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	c := durablev1.NewDurableClient(conn)
	deadLetter(b, c, fmt.Sprintf("run-%d", run), n)

	b.StartTimer()
	ctx := context.Background()
	resp, err := c.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{Rate: rate, Reason: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if resp.GetMatched() != int64(n) {
		b.Fatalf("the operation matched %d letters, want %d", resp.GetMatched(), n)
	}
	var op *durablev1.Operation
	for op.GetState() != durablev1.OperationState_OPERATION_STATE_COMPLETED {
		time.Sleep(100 * time.Millisecond)
		if op, err = c.DescribeOperation(ctx, &durablev1.DescribeOperationRequest{Id: resp.GetOperation().GetId()}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	took := op.GetFinishedTime().AsTime().Sub(op.GetStartedTime().AsTime())
	return float64(op.GetReleased()) / took.Seconds()
}

// deadLetter makes n dead letters in workflows of 100 activities each.
func deadLetter(b *testing.B, c durablev1.DurableClient, prefix string, n int) {
	ctx := context.Background()
	queue := prefix + "-q"
	for w := 0; w*100 < n; w++ {
		id := fmt.Sprintf("%s-%d", prefix, w)
		if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "Outage", TaskQueue: queue}); err != nil {
			b.Fatal(err)
		}
		wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: queue})
		if err != nil || wt.GetWorkflowId() != id {
			b.Fatalf("workflow task of %s: %v", id, err)
		}
		var cmds []*durablev1.Command
		for a := range min(100, n-w*100) {
			cmds = append(cmds, &durablev1.Command{
				Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: fmt.Sprint(a), ActivityType: "Charge",
				ActivityOptions: &durablev1.ActivityOptions{StartToCloseTimeout: durationpb.New(time.Minute), RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 1}},
			})
		}
		if _, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
			b.Fatal(err)
		}
	}
	for failed := 0; failed < n; {
		r, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: queue, MaxTasks: 100})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, task := range r.GetTasks() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: &durablev1.Failure{Type: "Unavailable"}}); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		failed += len(r.GetTasks())
	}
}
