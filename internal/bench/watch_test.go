package bench

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// The store BenchmarkWatchOpens opens watches over: a daemon that has run
// for a while. Most workflows closed long ago, each leaving a finished
// activity; a day's worth closed recently; some run, with pending
// activities of which a tenth are dead letters.
const (
	watchClosedOld    = 100_000
	watchClosedRecent = 2_000
	watchRunning      = 1_000
	watchPendingEach  = 5
)

// BenchmarkWatchOpens opens 200 Watch streams at once over gRPC against a
// daemon (engine, on-disk Badger, fsync on) holding the store above, while
// one client starts workflows one after another. The watchers run in a
// process of their own, as consoles do on other machines, so that decoding
// 200 snapshots is not the daemon's work. It reports the time until every
// stream got its SNAPSHOT_DONE, the daemon process's CPU time meanwhile
// (which, unlike wall time, other load on the machine hardly moves) and the
// latency of the starts made meanwhile (each a durable commit). A run that
// has not seen every snapshot after watchOpenLimit stops there and says how
// many it saw.
//
//	go test -run '^$' -bench WatchOpens -benchtime 3x ./internal/bench
func BenchmarkWatchOpens(b *testing.B) {
	const watchers = 200
	addr := watchDaemon(b)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	c := durablev1.NewDurableClient(conn)
	var opens, cpus []time.Duration
	var commits []time.Duration
	for run := range b.N {
		took, cpu, lat := watchOpenRun(b, c, addr, watchers, run)
		opens, cpus = append(opens, took), append(cpus, cpu)
		commits = append(commits, lat...)
	}
	slices.Sort(opens)
	slices.Sort(cpus)
	slices.Sort(commits)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(opens[len(opens)/2]), "all-snapshots-ms")
	b.ReportMetric(ms(opens[0]), "fastest-all-snapshots-ms")
	b.ReportMetric(ms(opens[len(opens)-1]), "slowest-all-snapshots-ms")
	b.ReportMetric(ms(cpus[len(cpus)/2]), "daemon-cpu-ms")
	if len(commits) > 0 {
		b.ReportMetric(ms(commits[len(commits)/2]), "commit-p50-ms")
		b.ReportMetric(ms(commits[len(commits)*99/100]), "commit-p99-ms")
		b.ReportMetric(ms(commits[len(commits)-1]), "commit-max-ms")
		b.ReportMetric(float64(len(commits))/float64(b.N), "commits/run")
	}
}

// watchOpenLimit bounds one run of BenchmarkWatchOpens.
const watchOpenLimit = 60 * time.Second

// envWatchers runs the test binary as the watchers of BenchmarkWatchOpens:
// "ADDR N" opens N watches on ADDR.
const envWatchers = "DURABLE_BENCH_WATCHERS"

// watchOpenRun starts the watchers' process and starts workflows until it
// says every watch has its snapshot. It returns how long the snapshots
// took, the CPU time this process (the daemon) used meanwhile and each
// start's latency.
func watchOpenRun(b *testing.B, c durablev1.DurableClient, addr string, n, run int) (time.Duration, time.Duration, []time.Duration) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", envWatchers, addr, n))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "opening" {
		b.Fatalf("watchers: %q", lines.Text())
	}
	self := cpuClock{}
	cpu0 := self.now()
	result := make(chan string, 1)
	go func() {
		lines.Scan()
		result <- lines.Text()
	}()
	var lat []time.Duration
	var line string
starts:
	for i := 0; ; i++ {
		select {
		case line = <-result:
			break starts
		default:
		}
		t := time.Now()
		_, err := c.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{
			WorkflowId: fmt.Sprintf("during-%d-%d", run, i), WorkflowType: "Probe", TaskQueue: "probe",
		})
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t))
	}
	cpu := self.now() - cpu0
	var done int
	var took time.Duration
	if _, err := fmt.Sscanf(line, "done %d %d", &done, &took); err != nil {
		b.Fatalf("watchers: %q: %v", line, err)
	}
	if done < n {
		b.Logf("run %d: %d of %d snapshots done after %v", run, done, n, took)
	}
	return took, cpu, lat
}

// runWatchers is the watchers' process: it opens n watches at once, says
// "opening", and once every one has its snapshot (or watchOpenLimit
// passed) says "done COUNT NANOSECONDS" and exits.
func runWatchers(spec string) error {
	var addr string
	var n int
	if _, err := fmt.Sscanf(spec, "%s %d", &addr, &n); err != nil {
		return err
	}
	conns := make([]*grpc.ClientConn, 8)
	for i := range conns {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
		if err != nil {
			return err
		}
		defer c.Close()
		conns[i] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), watchOpenLimit)
	defer cancel()
	snapshots := make(chan struct{}, n)
	fmt.Println("opening")
	begin := time.Now()
	for i := range n {
		go func() {
			s, err := durablev1.NewDurableClient(conns[i%len(conns)]).Watch(ctx, &durablev1.WatchRequest{})
			if err != nil {
				return
			}
			for {
				ev, err := s.Recv()
				if err != nil {
					return
				}
				if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
					snapshots <- struct{}{}
					<-ctx.Done() // keep the stream open, as a console does
					return
				}
			}
		}()
	}
	done := 0
	for done < n {
		select {
		case <-snapshots:
			done++
			continue
		case <-ctx.Done():
		}
		break
	}
	fmt.Printf("done %d %d\n", done, time.Since(begin))
	return nil
}

// watchDaemon fills an on-disk store, reopens it so the daemon starts from
// what is on disk, and serves an engine over it.
func watchDaemon(b *testing.B) string {
	dir := b.TempDir()
	st, err := badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := fillWatchStore(st, time.Now()); err != nil {
		b.Fatal(err)
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	st, err = badgerstore.Open(dir, badgerstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	eng, err := engine.New(st, engine.Options{Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	gs := server.New(eng, server.Options{Logger: logger}).NewGRPCServer()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go gs.Serve(l)
	b.Cleanup(func() {
		eng.Close()
		gs.Stop()
		st.Close()
	})
	return l.Addr().String()
}

// fillWatchStore writes the workflows and activities of the store above
// through the store's transactions, a few thousand records each.
func fillWatchStore(st engine.Store, now time.Time) error {
	const per = 2000
	ts := timestamppb.New
	opts := &durablev1.ActivityOptions{TaskQueue: "work", StartToCloseTimeout: durationpb.New(time.Minute)}
	closed := func(i int) (*durablev1.WorkflowRecord, *durablev1.FinishedActivity) {
		id := fmt.Sprintf("closed-%06d", i)
		// The recent ones closed within the last day, the others a week
		// and more ago.
		at := now.Add(-8*24*time.Hour + time.Duration(i)*time.Second)
		if i >= watchClosedOld {
			at = now.Add(-time.Duration(i-watchClosedOld+1) * time.Second)
		}
		w := &durablev1.WorkflowRecord{
			Info: &durablev1.WorkflowInfo{WorkflowId: id, WorkflowType: "Order", TaskQueue: "work",
				Status: durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED, StartTime: ts(at.Add(-time.Minute)), CloseTime: ts(at), HistoryLength: 8},
			NextEventId: 9, WtState: durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE,
		}
		f := &durablev1.FinishedActivity{
			Activity: &durablev1.PendingActivity{WorkflowId: id, ActivityId: "1", ActivityType: "Charge", TaskQueue: "work",
				State: durablev1.ActivityState_ACTIVITY_STATE_STARTED, Attempt: 1, MaxAttempts: 5, Options: opts,
				ScheduledTime: ts(at.Add(-time.Minute)), IdempotencyKey: id + "/1"},
			Outcome: engine.FinishedCompleted, FinishedTime: ts(at),
		}
		return w, f
	}
	total := watchClosedOld + watchClosedRecent
	for from := 0; from < total; from += per {
		err := st.Update(func(tx engine.Tx) error {
			for i := from; i < min(from+per, total); i++ {
				w, f := closed(i)
				if err := tx.PutWorkflow(w); err != nil {
					return err
				}
				if err := tx.PutFinishedActivity(f); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return st.Update(func(tx engine.Tx) error {
		seq := int64(1)
		for i := range watchRunning {
			id := fmt.Sprintf("running-%05d", i)
			err := tx.PutWorkflow(&durablev1.WorkflowRecord{
				Info: &durablev1.WorkflowInfo{WorkflowId: id, WorkflowType: "Order", TaskQueue: "work",
					Status: durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING, StartTime: ts(now.Add(-time.Hour)),
					PendingActivities: watchPendingEach, HistoryLength: 4},
				NextEventId: 5, WtState: durablev1.WorkflowTaskState_WORKFLOW_TASK_STATE_NONE,
			})
			if err != nil {
				return err
			}
			for j := range watchPendingEach {
				in := &durablev1.PendingActivity{WorkflowId: id, ActivityId: fmt.Sprint(j + 1), ActivityType: "Charge", TaskQueue: "work",
					State: durablev1.ActivityState_ACTIVITY_STATE_RETRYING, Attempt: 2, MaxAttempts: 5, Options: opts,
					ScheduledTime: ts(now.Add(-time.Hour)), NextAttemptTime: ts(now.Add(time.Hour)),
					LastFailure:    &durablev1.Failure{Type: "Timeout", Message: "upstream did not answer"},
					IdempotencyKey: id + "/" + fmt.Sprint(j+1)}
				if (i*watchPendingEach+j)%10 == 0 {
					in.State, in.NextAttemptTime = durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED, nil
					in.DeadLetteredTime = ts(now.Add(-time.Minute))
				}
				if err := tx.PutActivity(&durablev1.ActivityRecord{Info: in, Input: []byte(`{"order":42}`), Seq: seq, WorkflowType: "Order"}); err != nil {
					return err
				}
				seq++
			}
		}
		return tx.SetCounter(seq)
	})
}
