// Package bench measures durable end to end: a daemon (engine, on-disk Badger,
// gRPC) in the test process and a worker in a process of its own that speaks
// the raw protocol, so the figure is the engine's, not an SDK's. The
// throughput benchmarks also run on PostgreSQL and on several durabled
// processes (-bench.store, -bench.nodes in store_test.go).
//
//	go test -run '^$' -bench ActivityThroughput -benchtime 20000x ./internal/bench
//	go test -run '^$' -bench 'ActivityThroughput/(Succeed|FailOnce)$' -benchtime 20000x ./internal/bench -args -bench.store=postgres -bench.nodes=1
//	go test -run '^$' -bench RedriveRate -benchtime 5x ./internal/bench
package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testcert"
	"github.com/tinyllm/durable/internal/testdaemon"
	"github.com/tinyllm/durable/internal/tlsfile"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
	pgstore "github.com/tinyllm/durable/store/postgres"
)

const (
	envWorker       = "DURABLE_BENCH_WORKER"    // the daemons' addresses, comma-separated: run as the worker
	envFailOnce     = "DURABLE_BENCH_FAIL_ONCE" // "1": every first attempt fails
	envCA           = "DURABLE_BENCH_TLS_CA"    // the CA file of a TLS daemon
	envToken        = "DURABLE_BENCH_TOKEN"     // the worker's bearer token
	envInput        = "DURABLE_BENCH_INPUT"     // bytes of random input each activity is scheduled with
	envRoute        = "DURABLE_BENCH_ROUTE"     // "1": report each task through the node its workflow id picks
	concurrency     = 32                        // activities running at once in the worker
	pollBatch       = 8                         // tasks one activity poll may carry
	workflowPollers = 16                        // workflow task pollers in the worker
	perWorkflow     = 50                        // activities each workflow fans out
	taskQueue       = "bench"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(envWorker); addr != "" {
		input, _ := strconv.Atoi(os.Getenv(envInput))
		if err := runWorker(addr, os.Getenv(envFailOnce) == "1", os.Getenv(envRoute) == "1", os.Getenv(envCA), os.Getenv(envToken), input); err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if spec := os.Getenv(envWatchers); spec != "" {
		if err := runWatchers(spec); err != nil {
			fmt.Fprintln(os.Stderr, "bench watchers:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if addr := os.Getenv(envSDKWorker); addr != "" {
		if err := runSDKWorker(addr); err != nil {
			fmt.Fprintln(os.Stderr, "bench SDK worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	closeSharedDaemons()
	pgServer.Stop()
	testdaemon.Cleanup()
	os.Exit(code)
}

// BenchmarkActivityThroughput runs b.N activities through schedule → poll →
// complete, 32 at a time, and reports activities per second. FailOnce makes
// every activity fail its first attempt and succeed on the retry. The
// TLSAuth variants serve TLS and authenticate every call with a bearer token
// (workers, driver and reader are principals of an auth file), as a daemon
// run for a team does; Metrics turns the Prometheus metrics on.
func BenchmarkActivityThroughput(b *testing.B) {
	b.Run("Succeed", func(b *testing.B) { benchThroughput(b, setup{}) })
	b.Run("FailOnce", func(b *testing.B) { benchThroughput(b, setup{failOnce: true}) })
	b.Run("SucceedTLSAuth", func(b *testing.B) { benchThroughput(b, setup{secure: true}) })
	b.Run("FailOnceTLSAuth", func(b *testing.B) { benchThroughput(b, setup{failOnce: true, secure: true}) })
	b.Run("SucceedMetrics", func(b *testing.B) { benchThroughput(b, setup{metrics: true}) })
}

// setup is one variant of the benchmark.
type setup struct {
	failOnce bool
	secure   bool // TLS and bearer-token auth
	metrics  bool
	dsn      string                            // the PostgreSQL database to run on; Badger when empty
	observer engine.Observer                   // hears the engine when metrics are off
	jitter   func(time.Duration) time.Duration // replaces the retry jitter when set
}

func benchThroughput(b *testing.B, s setup) {
	t := flagTarget(b)
	d := startTarget(b, t, s)
	if b.N > 1 {
		b.Logf("on %s", t)
	}
	runThroughput(b, d, s, "bench")
}

// runThroughput is one run of BenchmarkActivityThroughput on d, with
// workflows named prefix-0, prefix-1, …. With several nodes the worker's
// pollers and the driver's workflows go to them round robin, or each
// workflow to the node its id picks with -bench.route.
func runThroughput(b *testing.B, d *daemon, s setup, prefix string) {
	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(os.Environ(), envWorker+"="+strings.Join(d.nodeAddrs(), ","), envFailOnce+"="+map[bool]string{true: "1", false: "0"}[s.failOnce],
		envCA+"="+d.caFile, envToken+"="+d.tokens["worker"], envRoute+"="+map[bool]string{true: "1", false: "0"}[*benchRoute])
	worker.Stderr = os.Stderr
	if err := worker.Start(); err != nil {
		b.Fatal(err)
	}
	// A worker that exits (a call it made failed) ends the run: the
	// workflows would otherwise wait for it forever.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := make(chan struct{})
	var stopping atomic.Bool
	go func() {
		worker.Wait()
		close(exited)
		if !stopping.Load() {
			cancel()
		}
	}()
	stopWorker := sync.OnceFunc(func() {
		stopping.Store(true)
		worker.Process.Kill()
		<-exited
	})
	b.Cleanup(stopWorker)
	fail := func(err error) {
		b.Helper()
		if ctx.Err() != nil {
			b.Fatalf("the worker exited (its error is above): %v", err)
		}
		b.Fatal(err)
	}
	// The driver starts workflows as a worker and waits for them as a
	// reader: two principals when auth is on.
	var starters, readers []durablev1.DurableClient
	for _, addr := range d.nodeAddrs() {
		starter, err := d.dialAt(addr, "worker")
		if err != nil {
			b.Fatal(err)
		}
		defer starter.Close()
		reader, err := d.dialAt(addr, "reader")
		if err != nil {
			b.Fatal(err)
		}
		defer reader.Close()
		starters, readers = append(starters, starter.Service()), append(readers, reader.Service())
	}

	var ids []string
	cpu := d.cpuClock(worker.Process.Pid)
	var pgBefore pgCounters
	var profile *pgProfile
	if d.pg != nil {
		pgBefore = d.pg.counters(b)
		if *benchPGProfile {
			profile = startPGProfile(b, d.pg)
		}
	}
	if d.pg != nil && *benchPGVacuum {
		d.pg.vacuum(b)
	}
	var tripsBefore int64
	if d.trips != nil {
		tripsBefore = d.trips()
	}
	var workBefore [4]int64
	if d.work != nil {
		workBefore = d.work.snapshot()
	}
	b.ResetTimer()
	start, cpuStart := time.Now(), cpu.now()
	for left := b.N; left > 0; left -= perWorkflow {
		n := min(left, perWorkflow)
		id := fmt.Sprintf("%s-%d", prefix, len(ids))
		c := starters[len(ids)%len(starters)]
		if *benchRoute {
			c = starters[nodeFor(id, len(starters))]
		}
		ids = append(ids, id)
		if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "FanOut", TaskQueue: taskQueue, Input: []byte(strconv.Itoa(n))}); err != nil {
			fail(err)
		}
	}
	for i, id := range ids {
		r := readers[i%len(readers)]
		for {
			desc, err := r.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: id, WaitForClose: true})
			if err != nil {
				fail(err)
			}
			if st := desc.GetWorkflow().GetStatus(); st == durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED {
				break
			} else if st != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
				b.Fatalf("workflow %s ended %v", id, st)
			}
		}
	}
	elapsed, cpuEnd := time.Since(start), cpu.now()
	b.StopTimer()
	d.report(b, elapsed, cpuEnd.sub(cpuStart))
	if d.trips != nil {
		b.ReportMetric(float64(d.trips()-tripsBefore)/float64(b.N), "round-trips/activity")
	}
	if d.work != nil {
		d.work.report(b, workBefore)
	}
	if d.pg != nil {
		if profile != nil {
			profile.end(b)
		}
		// The backends' statistics are complete once their connections
		// have closed.
		stopWorker()
		d.stop()
		d.pg.counters(b).report(b, pgBefore, b.N)
		if profile != nil && b.N > 1 {
			profile.report(b, b.N)
		}
	}
}

// report reports the rate and CPU per activity of a run of b.N activities
// that took elapsed and used.
func (d *daemon) report(b *testing.B, elapsed time.Duration, used runCPU) {
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "activities/s")
	b.ReportMetric(per(used.total()), "cpu-µs/activity")
	b.ReportMetric(per(used.daemon), "daemon-cpu-µs/activity")
	if d.pg != nil {
		b.ReportMetric(per(used.db), "db-cpu-µs/activity")
	}
}

// runCPU is the CPU time of a run's processes so far, by role.
type runCPU struct {
	daemon time.Duration // the durabled processes, or this process when the daemon runs in it
	client time.Duration // the worker, and this process's driver when the daemon runs elsewhere
	db     time.Duration // the PostgreSQL server
}

func (c runCPU) total() time.Duration { return c.daemon + c.client + c.db }

func (c runCPU) sub(o runCPU) runCPU {
	return runCPU{daemon: c.daemon - o.daemon, client: c.client - o.client, db: c.db - o.db}
}

// runClock reads the runCPU of a run.
type runClock struct {
	d         *daemon
	workerPID int
}

func (d *daemon) cpuClock(workerPID int) runClock { return runClock{d: d, workerPID: workerPID} }

func (c runClock) now() runCPU {
	r := runCPU{client: procCPU(c.workerPID), db: c.d.pg.cpu()}
	if len(c.d.pids) == 0 {
		r.daemon = selfCPU()
	} else {
		r.client += selfCPU()
		for _, pid := range c.d.pids {
			r.daemon += procCPU(pid)
		}
	}
	return r
}

// daemon is the daemon of one benchmark run and what its clients need.
type daemon struct {
	eng    *engine.Engine // in this process, for what needs no RPC; nil for durabled processes
	addr   string
	addrs  []string          // every node's address when the daemon is durabled processes
	pids   []int             // the durabled processes
	caFile string            // set when it serves TLS
	tokens map[string]string // role → bearer token, when auth is on
	pg     *pgDatabase       // the database, on PostgreSQL
	stop   func()            // stops the daemon (idempotent), for runs that read the database after
	// trips counts the store's round trips to the database, when the
	// daemon runs in this process on PostgreSQL.
	trips func() int64
	// work counts the daemon's calls, commits and syncs, when it runs in
	// this process.
	work *workCounts
}

// workCounts counts what a daemon in this process does for a run: the
// unary calls it serves and the store transactions and syncs of its
// batcher. Per activity they say how many of each an activity costs, which
// with the cost of one says where a floor under the CPU per activity lies.
type workCounts struct {
	engine.Observer // the observer of the setup, or nil
	calls           atomic.Int64
	commits         atomic.Int64
	transitions     atomic.Int64
	syncs           atomic.Int64
}

func (w *workCounts) countCall(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	w.calls.Add(1)
	return handler(ctx, req)
}

func (w *workCounts) AttemptStarted(typ string, attempt int32, waited time.Duration) {
	if w.Observer != nil {
		w.Observer.AttemptStarted(typ, attempt, waited)
	}
}

func (w *workCounts) AttemptEnded(typ string, result engine.AttemptResult, took time.Duration) {
	if w.Observer != nil {
		w.Observer.AttemptEnded(typ, result, took)
	}
}

func (w *workCounts) TimedOut(typ, kind string) {
	if w.Observer != nil {
		w.Observer.TimedOut(typ, kind)
	}
}

func (w *workCounts) DeadLettered(typ string) {
	if w.Observer != nil {
		w.Observer.DeadLettered(typ)
	}
}

func (w *workCounts) Redriven(typ string) {
	if w.Observer != nil {
		w.Observer.Redriven(typ)
	}
}

func (w *workCounts) BatchCommitted(transitions int, took time.Duration) {
	w.commits.Add(1)
	w.transitions.Add(int64(transitions))
	if w.Observer != nil {
		w.Observer.BatchCommitted(transitions, took)
	}
}

func (w *workCounts) Synced(took time.Duration) {
	w.syncs.Add(1)
	if w.Observer != nil {
		w.Observer.Synced(took)
	}
}

// snapshot returns the counts so far: calls, commits, transitions, syncs.
func (w *workCounts) snapshot() [4]int64 {
	return [4]int64{w.calls.Load(), w.commits.Load(), w.transitions.Load(), w.syncs.Load()}
}

// report reports what the run since before cost per activity.
func (w *workCounts) report(b *testing.B, before [4]int64) {
	now := w.snapshot()
	for i, unit := range []string{"calls/activity", "commits/activity", "transitions/activity", "syncs/activity"} {
		b.ReportMetric(float64(now[i]-before[i])/float64(b.N), unit)
	}
}

// nodeAddrs lists the address of every node, one for a daemon of one.
func (d *daemon) nodeAddrs() []string {
	if len(d.addrs) == 0 {
		return []string{d.addr}
	}
	return d.addrs
}

// dial connects as the principal of role.
func (d *daemon) dial(role string) (*client.Client, error) {
	return d.dialAt(d.addr, role)
}

// dialAt connects to the node at addr as the principal of role.
func (d *daemon) dialAt(addr, role string) (*client.Client, error) {
	return client.New(addr, d.options(role)...)
}

func (d *daemon) options(role string) []client.Option {
	var opts []client.Option
	if d.caFile != "" {
		opts = append(opts, client.WithTLS(client.TLSFiles{CAFile: d.caFile}))
	}
	if tok := d.tokens[role]; tok != "" {
		opts = append(opts, client.WithToken(tok))
	}
	return opts
}

// startDaemon serves an engine over an on-disk store, durable by default,
// with TLS and auth or metrics when the setup asks for them, until the
// benchmark ends.
func startDaemon(b *testing.B, s setup) *daemon {
	d, stop := openDaemon(b, b.TempDir(), s)
	b.Cleanup(stop)
	return d
}

// openDaemon is startDaemon over dir, stopped by the function it returns
// rather than by the end of a benchmark, for a state that several runs
// share. tb is used only while it starts.
func openDaemon(tb testing.TB, dir string, s setup) (*daemon, func()) {
	var st engine.Store
	var err error
	if s.dsn != "" {
		st, err = pgstore.Open(s.dsn, pgstore.Options{})
	} else {
		st, err = badgerstore.Open(dir, badgerstore.Options{})
	}
	if err != nil {
		tb.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	eopts := engine.Options{Observer: s.observer, Jitter: s.jitter}
	sopts := server.Options{Logger: logger}
	if s.metrics {
		sopts.Metrics = server.NewMetrics()
		eopts.Observer = sopts.Metrics
	}
	work := &workCounts{Observer: eopts.Observer}
	eopts.Observer = work
	eopts.Logger = logger
	eng, err := engine.New(st, eopts)
	if err != nil {
		tb.Fatal(err)
	}
	d := &daemon{eng: eng, tokens: map[string]string{}, work: work}
	if pg, ok := st.(*pgstore.Store); ok {
		d.trips = pg.RoundTrips
	}
	extra := []grpc.ServerOption{grpc.ChainUnaryInterceptor(work.countCall)}
	if s.secure {
		certDir := tb.TempDir()
		files := testcert.NewCA(tb, "bench CA").WriteFiles(tb, certDir, "daemon", "durabled", "127.0.0.1")
		pair, err := tlsfile.LoadKeyPair(files.Cert, files.Key)
		if err != nil {
			tb.Fatal(err)
		}
		extra = append(extra, grpc.Creds(credentials.NewTLS(tlsfile.ServerConfig(pair, nil))))
		d.caFile = files.CA
		var entries []string
		for _, role := range []string{"worker", "reader"} {
			tok := "bench-token-" + role
			d.tokens[role] = tok
			sum := sha256.Sum256([]byte(tok))
			entries = append(entries, fmt.Sprintf(`{"name": %q, "role": %q, "token_sha256": %q}`, "bench-"+role, role, hex.EncodeToString(sum[:])))
		}
		ids, err := server.ParseAuthFile([]byte(`{"principals": [` + strings.Join(entries, ",") + `]}`))
		if err != nil {
			tb.Fatal(err)
		}
		sopts.Auth = server.NewAuthFrom(ids)
	}
	gs := server.New(eng, sopts).NewGRPCServer(extra...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go gs.Serve(l)
	d.addr = l.Addr().String()
	return d, func() {
		eng.Close()
		gs.Stop()
		st.Close()
	}
}

// runWorker is the worker process: activity pollers that complete (or fail
// once) each task, and workflow pollers that fan out as many activities as
// the workflow's input says, each with input bytes of random input, and
// complete the workflow when all of them have completed. addrs lists the
// daemon's nodes, comma-separated; the pollers go to them round robin, each
// kind starting with the first. A report goes through the node that handed
// the task out or, with route, through the node the task's workflow id
// picks.
func runWorker(addrs string, failOnce, route bool, caFile, token string, input int) error {
	d := &daemon{addrs: strings.Split(addrs, ","), caFile: caFile, tokens: map[string]string{"worker": token}}
	var nodes []durablev1.DurableClient
	for _, addr := range d.addrs {
		cl, err := d.dialAt(addr, "worker")
		if err != nil {
			return err
		}
		nodes = append(nodes, cl.Service())
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, concurrency+workflowPollers)
	for i := range concurrency / pollBatch {
		c := reporter{poller: nodes[i%len(nodes)]}
		if route {
			c.nodes = nodes
		}
		wg.Go(func() { errs <- activityLoop(ctx, c, failOnce) })
	}
	for i := range workflowPollers {
		c := reporter{poller: nodes[i%len(nodes)]}
		if route {
			c.nodes = nodes
		}
		wg.Go(func() { errs <- workflowLoop(ctx, c, input) })
	}
	return <-errs
}

// reporter is a poll loop's way to the daemon: it polls through poller and
// reports a task of a workflow through poller too or, when nodes is set,
// through the node the workflow id picks.
type reporter struct {
	poller durablev1.DurableClient
	nodes  []durablev1.DurableClient
}

func (r reporter) of(workflowID string) durablev1.DurableClient {
	if r.nodes == nil {
		return r.poller
	}
	return r.nodes[nodeFor(workflowID, len(r.nodes))]
}

// nodeFor picks one of n nodes for a workflow: the same one for every call
// that names it (FNV-1a of the id).
func nodeFor(workflowID string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(workflowID))
	return int(h.Sum32() % uint32(n))
}

// attempts records the activity attempts a worker was handed, so that one
// handed out twice (which the contract forbids, on any store and any
// number of nodes) fails the run.
type attempts struct {
	mu   sync.Mutex
	seen map[string]bool
}

var handedOut = attempts{seen: map[string]bool{}}

// once records an attempt and fails if it was handed out before.
func (a *attempts) once(workflowID, activityID string, attempt int32) error {
	key := fmt.Sprintf("%s/%s#%d", workflowID, activityID, attempt)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen[key] {
		return fmt.Errorf("attempt %d of activity %s/%s handed out twice", attempt, workflowID, activityID)
	}
	a.seen[key] = true
	return nil
}

// activityLoop polls for up to pollBatch tasks and runs them concurrently,
// so concurrency/pollBatch loops keep concurrency activities in flight.
// Every refused report fails the run: an attempt's lease (a minute) does
// not run out in a benchmark.
func activityLoop(ctx context.Context, c reporter, failOnce bool) error {
	for {
		r, err := c.poller.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: taskQueue, Identity: "bench", MaxTasks: pollBatch})
		if err != nil {
			return err
		}
		for _, t := range r.GetTasks() {
			if err := handedOut.once(t.GetWorkflowId(), t.GetActivityId(), t.GetAttempt()); err != nil {
				return err
			}
		}
		errs := make(chan error, len(r.GetTasks()))
		for _, t := range r.GetTasks() {
			go func() {
				var err error
				c := c.of(t.GetWorkflowId())
				if failOnce && t.GetAttempt() == 1 {
					_, err = c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: t.GetTaskToken(), Failure: &durablev1.Failure{Type: "Flaky", Message: "first attempt"}})
				} else {
					_, err = c.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: t.GetTaskToken(), Result: []byte("1")})
				}
				errs <- err
			}()
		}
		for range r.GetTasks() {
			if err := <-errs; err != nil {
				return err
			}
		}
	}
}

func workflowLoop(ctx context.Context, c reporter, input int) error {
	opts := &durablev1.ActivityOptions{
		StartToCloseTimeout: durationpb.New(time.Minute),
		RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 1, MaxIntervalMs: 10},
	}
	for {
		r, err := c.poller.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: taskQueue, Identity: "bench"})
		if err != nil {
			return err
		}
		polled := time.Now()
		if len(r.GetTaskToken()) == 0 {
			continue
		}
		if len(r.GetHistory()) == 0 {
			return fmt.Errorf("the workflow task of %s (attempt %d) was handed out without its history", r.GetWorkflowId(), r.GetAttempt())
		}
		var want, scheduled, completed int
		for _, ev := range r.GetHistory() {
			switch ev.GetType() {
			case durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
				want, _ = strconv.Atoi(string(ev.GetInput()))
			case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				scheduled++
			case durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				completed++
			}
		}
		var cmds []*durablev1.Command
		switch {
		case scheduled == 0:
			// Random bytes, so that the store's compression cannot make
			// the payloads smaller than they are in real use.
			var seed [32]byte
			copy(seed[:], r.GetWorkflowId())
			rng := rand.NewChaCha8(seed)
			for i := range want {
				var in []byte
				if input > 0 {
					in = make([]byte, input)
					rng.Read(in)
				}
				cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: strconv.Itoa(i + 1), ActivityType: "Work", Input: in, ActivityOptions: opts})
			}
		case completed == want:
			cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW})
		}
		_, err = c.of(r.GetWorkflowId()).CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: r.GetTaskToken(), Identity: "bench", Commands: cmds})
		if status.Code(err) == codes.FailedPrecondition {
			// The task's lease (10 s) ran out before its report committed,
			// as it can on an overloaded machine: the daemon hands the task
			// out again, and this loop, like the SDK's worker, drops the
			// report and runs it then. Said, so that the figure is read
			// with it.
			fmt.Fprintf(os.Stderr, "bench worker: the report of the workflow task of %s (attempt %d) was refused %s after its poll (%v); the task will be handed out again\n",
				r.GetWorkflowId(), r.GetAttempt(), time.Since(polled).Round(time.Millisecond), err)
			continue
		}
		if err != nil {
			return err
		}
	}
}
