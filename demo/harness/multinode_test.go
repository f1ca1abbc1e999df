package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/demo/flaky"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// setupNodes starts a Cluster of n durabled nodes on a fresh database of
// the test binary's PostgreSQL, and a raw protocol client of each node. It
// skips when PostgreSQL's programs are missing (fails with
// DURABLE_TEST_POSTGRES=require) or when durabled runs one node per
// database.
func setupNodes(t *testing.T, n int) (*Cluster, []durablev1.DurableClient) {
	t.Helper()
	if usedStore() == "postgres" {
		// Nodes always share a PostgreSQL database: the default pass ran
		// this test already.
		t.Skip("runs on PostgreSQL in the default pass; " + storeEnv + "=postgres adds nothing to it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ok, err := SupportsNodes(ctx, durabledBin)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skip("this durabled runs one node per database (no --node flag): several nodes need the shared store and runtime")
	}
	dsn := testpg.Database(t)
	dir := t.TempDir()
	c, err := Start(ctx, Options{Dir: dir, Durabled: durabledBin, Worker: []string{demoBin, "worker"}, PostgresDSN: dsn, Nodes: n})
	if err != nil {
		t.Fatal(err)
	}
	closeWithLogs(t, c, dir)
	svcs := make([]durablev1.DurableClient, n)
	for i := range n {
		conn, err := grpc.NewClient(c.NodeAddr(i), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		svcs[i] = durablev1.NewDurableClient(conn)
	}
	return c, svcs
}

// TestMultiNodeKillLoopExactlyOnce runs FlakyDemo (20 activities, fail rate
// 0.5) on three durabled nodes sharing one database, with every worker
// dialling all three, while workers are SIGKILLed right after their effect
// became durable and nodes chosen at random are SIGKILLed and started
// again: the workflow completes, every effect is applied exactly once, no
// report a node acknowledged is missing from the record, and every node
// ends with the same history and nothing pending.
func TestMultiNodeKillLoopExactlyOnce(t *testing.T) {
	t.Parallel()
	c, svcs := setupNodes(t, 3)
	r, err := RunFlaky(context.Background(), c, FlakyPlan{
		WorkflowID:     "multi-node",
		Input:          flaky.Input{Activities: 20, FailRate: 0.5, Seed: 7},
		Workers:        3,
		WorkerKills:    6,
		DaemonRestarts: 4,
		Timeout:        3 * time.Minute,
		Logf:           t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", *r)
	if !r.Completed {
		t.Fatalf("workflow %s, want completed", r.Status)
	}
	if r.Activities != 20 || r.EffectsApplied != 20 || !r.ExactlyOnce {
		t.Errorf("activities %d, effects applied %d, missing %v, unexpected %v; want 20 applied exactly once",
			r.Activities, r.EffectsApplied, r.MissingKeys, r.UnexpectedKeys)
	}
	if r.ReportsAcknowledged < r.Activities {
		t.Errorf("%d reports acknowledged for %d activities: the workers' report log is not read", r.ReportsAcknowledged, r.Activities)
	}
	for _, l := range r.AcknowledgedLost {
		t.Errorf("acknowledged and lost: %s", l)
	}
	kills := 0
	for _, n := range r.NodeKills {
		kills += n
	}
	if r.WorkerKills != 6 || kills < 2 || r.DaemonRestarts != kills {
		t.Errorf("worker kills %d, node kills %v, nodes restarted %d; want 6, at least 2, all restarted", r.WorkerKills, r.NodeKills, r.DaemonRestarts)
	}

	// Internal errors are not part of the contract, but a node may answer
	// one (a transaction that kept failing to serialize, say) and the
	// run still holds: count them for whoever reads the log.
	if n := countLines(t, filepath.Join(c.opts.Dir, "logs", "durabled-*.log"), `msg="internal error"`); n > 0 {
		t.Logf("the nodes answered %d calls with an internal error (see their logs)", n)
	}

	// Every node, the restarted ones included, tells the same story. The
	// calls wait for a connection that is still backing off after the
	// node's restart.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := -1
	for i, svc := range svcs {
		h, err := svc.GetWorkflowHistory(ctx, &durablev1.GetWorkflowHistoryRequest{WorkflowId: "multi-node"}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("%s: history: %v", c.NodeName(i), err)
		}
		if want < 0 {
			want = len(h.GetEvents())
		} else if len(h.GetEvents()) != want {
			t.Errorf("%s: %d history events, %s has %d", c.NodeName(i), len(h.GetEvents()), c.NodeName(0), want)
		}
		d, err := svc.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: "multi-node"}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("%s: describe: %v", c.NodeName(i), err)
		}
		if n := len(d.GetPendingActivities()); n != 0 {
			t.Errorf("%s: %d activities still pending after the workflow completed", c.NodeName(i), n)
		}
	}
}

// The activities TestTimerFiresOnceAcrossNodes leases at once and lets
// time out together: raceActivities in each of raceWorkflows workflows.
const (
	raceWorkflows  = 10
	raceActivities = 30
)

// TestTimerFiresOnceAcrossNodes schedules 300 activities (30 in each of 10
// workflows) and leases their first attempts in polls of up to 100 without
// ever reporting them, so the leases of each poll run out at the same
// instant: three nodes' timer loops race to fire each of those timers, the
// retries are due at once, and pollers parked on all three nodes race to
// take them. Each attempt is handed out exactly once, counted from the
// pollers' side, and the workflows' record agrees: every activity's attempt
// trail holds exactly the attempts handed out, the first timed out, and
// history starts and completes the last one once.
func TestTimerFiresOnceAcrossNodes(t *testing.T) {
	t.Parallel()
	c, svcs := setupNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const queue = "timer-race"
	total := raceWorkflows * raceActivities
	opts := &durablev1.ActivityOptions{
		StartToCloseTimeout: durationpb.New(3 * time.Second),
		// The retry of a timed-out attempt is due at once (full jitter of
		// 1 ms): the racers take it as soon as a node fires the timer.
		RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1, MaxAttempts: 10},
	}
	for w := range raceWorkflows {
		id := fmt.Sprintf("timer-race-%d", w)
		if _, err := svcs[0].StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "TimerRace", TaskQueue: queue}); err != nil {
			t.Fatal(err)
		}
		wt, err := svcs[1].PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "decider"})
		if err != nil || len(wt.GetTaskToken()) == 0 {
			t.Fatalf("poll the workflow task of %s: %v (token %q)", id, err, wt.GetTaskToken())
		}
		cmds := make([]*durablev1.Command, raceActivities)
		for i := range cmds {
			cmds[i] = &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY,
				ActivityId: fmt.Sprintf("a%02d", i), ActivityType: "Race", Input: []byte(`{}`), ActivityOptions: opts}
		}
		if _, err := svcs[2].CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{
			TaskToken: wt.GetTaskToken(), Identity: "decider", Commands: cmds}); err != nil {
			t.Fatal(err)
		}
	}

	type attempt struct {
		workflow, activity string
		attempt            int32
	}
	var (
		mu        sync.Mutex
		handouts  = map[attempt][]string{} // who got each attempt
		byNode    = map[string]int{}       // retries handed out by each node
		completed = map[string]int32{}     // the attempt whose completion was acknowledged
		refused   int                      // completions refused: the lease had run out
		internal  []string                 // completions answered with an internal error
	)
	allDone := make(chan struct{})
	// take records a poll's tasks, holds first attempts (never reports
	// them) and completes every later one through the node it polled.
	take := func(who string, node int, tasks []*durablev1.ActivityTask) (first int) {
		mu.Lock()
		for _, tk := range tasks {
			k := attempt{tk.GetWorkflowId(), tk.GetActivityId(), tk.GetAttempt()}
			handouts[k] = append(handouts[k], who)
			if tk.GetAttempt() == 1 {
				first++
			} else {
				byNode[c.NodeName(node)]++
			}
		}
		mu.Unlock()
		var wg sync.WaitGroup
		for _, tk := range tasks {
			if tk.GetAttempt() == 1 {
				continue
			}
			wg.Go(func() {
				_, err := svcs[node].CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: tk.GetTaskToken(), Identity: who})
				mu.Lock()
				defer mu.Unlock()
				switch status.Code(err) {
				case codes.OK:
					key := tk.GetWorkflowId() + "/" + tk.GetActivityId()
					if _, twice := completed[key]; twice {
						t.Errorf("%s completed twice, the second time attempt %d through %s", key, tk.GetAttempt(), c.NodeName(node))
						return
					}
					completed[key] = tk.GetAttempt()
					if len(completed) == total {
						close(allDone)
					}
				case codes.FailedPrecondition:
					refused++ // a slow machine: the attempt timed out and retries
				case codes.Internal:
					// Not this test's subject: a completion the node
					// failed to commit leaves the attempt to time out and
					// retry, which the checks below follow. Logged for
					// whoever reads the run.
					internal = append(internal, fmt.Sprintf("%s/%s attempt %d through %s: %v", tk.GetWorkflowId(), tk.GetActivityId(), tk.GetAttempt(), c.NodeName(node), err))
				default:
					t.Errorf("%s: complete %s/%s attempt %d through %s: %v", who, tk.GetWorkflowId(), tk.GetActivityId(), tk.GetAttempt(), c.NodeName(node), err)
				}
			})
		}
		wg.Wait()
		return first
	}

	// The first attempts, leased in polls of up to 100 through the nodes in
	// turn.
	leased, polls := 0, 0
	for i := 0; leased < total; i++ {
		node := i % len(svcs)
		resp, err := svcs[node].PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: queue, Identity: "holder", MaxTasks: 100})
		if err != nil {
			t.Fatalf("holder poll on %s: %v", c.NodeName(node), err)
		}
		leased += take("holder", node, resp.GetTasks())
		polls++
	}
	t.Logf("%d first attempts leased in %d polls: up to 100 leases end at each instant", leased, polls)

	// Two racers per node take the retries.
	rctx, stopRacers := context.WithCancel(ctx)
	var racers sync.WaitGroup
	for node, svc := range svcs {
		for r := range 2 {
			who := fmt.Sprintf("racer-%s-%d", c.NodeName(node), r)
			racers.Go(func() {
				for rctx.Err() == nil {
					resp, err := svc.PollActivityTask(rctx, &durablev1.PollActivityTaskRequest{TaskQueue: queue, Identity: who, MaxTasks: 20})
					if err == nil {
						take(who, node, resp.GetTasks())
					}
				}
			})
		}
	}
	select {
	case <-allDone:
	case <-ctx.Done():
	}
	stopRacers()
	racers.Wait()
	mu.Lock()
	if len(completed) < total {
		mu.Unlock()
		t.Fatalf("%d of %d activities completed within the deadline", len(completed), total)
	}
	mu.Unlock()

	// Nothing is left for anyone: a poll on each node finds nothing.
	var late sync.WaitGroup
	for node, svc := range svcs {
		late.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			resp, _ := svc.PollActivityTask(pctx, &durablev1.PollActivityTaskRequest{TaskQueue: queue, Identity: "late", MaxTasks: 100})
			take("late", node, resp.GetTasks())
		})
	}
	late.Wait()

	mu.Lock()
	defer mu.Unlock()
	for k, who := range handouts {
		if len(who) != 1 {
			t.Errorf("%s/%s attempt %d handed out %d times, to %v", k.workflow, k.activity, k.attempt, len(who), who)
		}
	}
	t.Logf("retries handed out per node: %v; completions refused for a lease that had run out: %d", byNode, refused)
	if len(internal) > 0 {
		t.Logf("%d completions answered with an internal error, their attempts retried; the first: %s", len(internal), internal[0])
	}

	// The record agrees with the hand-outs.
	more := 0
	for w := range raceWorkflows {
		id := fmt.Sprintf("timer-race-%d", w)
		hist, err := svcs[w%3].GetWorkflowHistory(ctx, &durablev1.GetWorkflowHistoryRequest{WorkflowId: id})
		if err != nil {
			t.Fatal(err)
		}
		started, finished := map[string]int32{}, map[string]int{}
		for _, e := range hist.GetEvents() {
			switch e.GetType() {
			case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_STARTED:
				if _, dup := started[e.GetActivityId()]; dup {
					t.Errorf("%s/%s started twice in history", id, e.GetActivityId())
				}
				started[e.GetActivityId()] = e.GetAttempt()
			case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				finished[e.GetActivityId()]++
			}
		}
		desc, err := svcs[(w+1)%3].DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: id})
		if err != nil {
			t.Fatal(err)
		}
		trails := map[string][]*durablev1.AttemptRecord{}
		for _, f := range desc.GetFinishedActivities() {
			trails[f.GetActivity().GetActivityId()] = f.GetActivity().GetAttempts()
		}
		for i := range raceActivities {
			act := fmt.Sprintf("a%02d", i)
			last := completed[id+"/"+act]
			if last > 2 {
				more++
			}
			if started[act] != last || finished[act] != 1 {
				t.Errorf("%s/%s: history starts attempt %d and completes it %d times, want attempt %d once", id, act, started[act], finished[act], last)
			}
			tr := trails[act]
			if len(tr) != int(last) || tr[0].GetFailure().GetType() != "StartToCloseTimeout" || tr[len(tr)-1].GetFailure() != nil {
				t.Errorf("%s/%s: attempt trail %v, want attempts 1 to %d, the first timed out, the last completed", id, act, tr, last)
				continue
			}
			for j, r := range tr {
				if r.GetAttempt() != int32(j+1) || len(handouts[attempt{id, act, r.GetAttempt()}]) != 1 {
					t.Errorf("%s/%s: attempt %d in the trail, handed out to %v", id, act, r.GetAttempt(), handouts[attempt{id, act, r.GetAttempt()}])
				}
			}
			if _, extra := handouts[attempt{id, act, last + 1}]; extra {
				t.Errorf("%s/%s: attempt %d handed out after attempt %d completed", id, act, last+1, last)
			}
		}
	}
	if more > 0 {
		t.Logf("%d activities needed more than two attempts (a completion refused or failed, or an attempt that outlived its 3 s lease on a busy machine)", more)
	}
}

// wakeups is how many tasks TestCrossNodeWakeup sends across nodes.
const wakeups = 200

// TestCrossNodeWakeup parks a poll on node B, then starts a workflow through
// node A, whose first workflow task must reach the parked poll: B hears of
// it from A through the database, with no poll of its own to find it. Done
// 200 times, it logs the latency from the start call on A to the task's
// arrival on B. It asserts delivery (the parked poll itself gets the task,
// within a deadline far from any timing claim), not speed.
func TestCrossNodeWakeup(t *testing.T) {
	t.Parallel()
	c, svcs := setupNodes(t, 2)
	a, b := svcs[0], svcs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const (
		queue = "wakeup"
		hang  = 10 * time.Second // below the 20 s long poll: a poll nobody woke fails
	)
	type polled struct {
		resp *durablev1.PollWorkflowTaskResponse
		err  error
		at   time.Time
	}
	lat := make([]time.Duration, 0, wakeups)
	for i := range wakeups {
		got := make(chan polled, 1)
		pctx, pcancel := context.WithTimeout(ctx, 2*hang)
		go func() {
			resp, err := b.PollWorkflowTask(pctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "parked-on-b"})
			got <- polled{resp, err, time.Now()}
		}()
		waitFor(t, hang, "a poll parked on "+c.NodeName(1), func() bool {
			qs, err := b.ListTaskQueues(ctx, &durablev1.ListTaskQueuesRequest{TaskQueue: queue})
			if err != nil {
				return false
			}
			for _, q := range qs.GetTaskQueues() {
				for _, p := range q.GetPollers() {
					if p.GetIdentity() == "parked-on-b" && p.GetKind() == durablev1.TaskKind_TASK_KIND_WORKFLOW && p.GetParked() {
						return true
					}
				}
			}
			return false
		})
		id := fmt.Sprintf("wake-%03d", i)
		t0 := time.Now()
		if _, err := a.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "Wakeup", TaskQueue: queue}); err != nil {
			pcancel()
			t.Fatalf("start %s on %s: %v", id, c.NodeName(0), err)
		}
		var p polled
		select {
		case p = <-got:
		case <-time.After(hang):
			pcancel()
			t.Fatalf("%s, started on %s, did not reach the poll parked on %s within %s", id, c.NodeName(0), c.NodeName(1), hang)
		}
		pcancel()
		switch {
		case p.err != nil:
			t.Fatalf("the poll parked on %s for %s: %v", c.NodeName(1), id, p.err)
		case p.resp.GetWorkflowId() != id:
			t.Fatalf("the poll parked on %s got %q, want %s", c.NodeName(1), p.resp.GetWorkflowId(), id)
		}
		lat = append(lat, p.at.Sub(t0))
		if _, err := b.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: p.resp.GetTaskToken(), Identity: "parked-on-b",
			Commands: []*durablev1.Command{{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW}}}); err != nil {
			t.Fatalf("complete %s: %v", id, err)
		}
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(10 * time.Microsecond) }
	t.Logf("start on %s to the task on the poll parked on %s, %d tasks: p50 %s, p90 %s, p99 %s, max %s",
		c.NodeName(0), c.NodeName(1), len(lat), q(0.5), q(0.9), q(0.99), lat[len(lat)-1].Round(10*time.Microsecond))
}

// countLines counts the lines holding substr in the files glob matches.
func countLines(t *testing.T, glob, substr string) int {
	t.Helper()
	files, _ := filepath.Glob(glob)
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), substr)
	}
	return n
}
