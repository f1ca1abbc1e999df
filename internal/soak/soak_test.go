package soak

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tinyllm/durable/demo/sink"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
	"github.com/tinyllm/durable/worker"
)

var (
	flagDuration  = flag.Duration("soak.duration", 10*time.Minute, "how long the long soak (-tags soak) loads and kills durabled")
	flagKillEvery = flag.Duration("soak.kill-every", 3*time.Second, "the long soak's mean time between two SIGKILLs")
	flagStarters  = flag.Int("soak.workflows", 8, "the long soak's workflows in flight")
	flagSeed      = flag.Uint64("soak.seed", 0, "the seed of the workload and of the kill times; 0 draws one (printed)")
	flagKeep      = flag.Bool("soak.keep", false, "keep the run's directory (logs, data, sink, report) even when it passes")
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	testdaemon.Cleanup()
	os.Exit(code)
}

// plan is one soak run.
type plan struct {
	// load is how long workflows are started and durabled is killed.
	load time.Duration
	// kills is how many SIGKILLs, one at a random moment in each equal
	// slice of load.
	kills int
	// starters is how many workflows are in flight.
	starters int
	// settle bounds the wait, after the last kill, for every workflow and
	// operation to finish.
	settle time.Duration
}

// memoryBudget is durabled's --memory-budget in the soak: the default,
// given explicitly so that the bound below follows it.
const memoryBudget = badgerstore.DefaultMemoryBudget

// rssLimit bounds durabled's resident set at every moment of the run: what
// the store promises for the budget (Memory.ResidentCeiling, 384 MiB for
// the default), which holds while requests in flight and the queues of
// waiting activities fit in the budget's heap, as the soak's do.
var rssLimit = func() int64 {
	mem, err := badgerstore.MemoryFor(memoryBudget)
	if err != nil {
		panic(err)
	}
	return mem.ResidentCeiling()
}()

// daemonArgs are durabled's flags (on disk, fsync on: the defaults).
// Workflow tasks whose answer is lost in a restart come back after 5 s rather
// than 10.
func daemonArgs() []string {
	return []string{"--workflow-task-timeout", "5s", "--memory-budget", strconv.FormatInt(memoryBudget, 10)}
}

// minUptime is the least time durabled serves between two kills, so that
// every run of it sees some load.
const minUptime = 500 * time.Millisecond

// soak runs the plan and fails t on any problem; the figures are logged
// and written to report.txt in the run's directory.
func soak(t *testing.T, p plan) {
	if deadline, ok := t.Deadline(); ok {
		if need := p.load + p.settle + 2*time.Minute; time.Until(deadline) < need {
			t.Fatalf("this soak needs about %s and the test binary's -timeout ends sooner: run with -timeout 0 (or at least %s)",
				need.Round(time.Minute), need.Round(time.Minute))
		}
	}
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	dir := runDir(t)
	t.Logf("soak: seed %d (-soak.seed %d repeats the workload and kill times), directory %s", seed, seed, dir)

	snk, err := sink.Open(filepath.Join(dir, "sink"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snk.Close() })
	d := startDaemon(t, filepath.Join(dir, "data"), filepath.Join(dir, "durabled.log"), daemonArgs())
	led, gts := newLedger(), newGates()
	workers := startWorkers(t, d.book, led, &activities{sink: snk, gates: gts}, filepath.Join(dir, "workers.log"))
	ld := &load{c: d.book.dial(t, "soak-operator"), ledger: led, gates: gts, seed: seed}

	run, stopRun := context.WithCancel(context.Background())
	defer stopRun()
	more, stopMore := context.WithCancel(run)
	var starters sync.WaitGroup
	for i := range p.starters {
		starters.Go(func() { ld.starter(more, run, i) })
	}
	opRand := rand.New(rand.NewPCG(seed, 1))
	nextRound := func() time.Duration { // called by the operator only
		if gts.all.Load() {
			return 200 * time.Millisecond
		}
		return time.Duration(500+opRand.IntN(1000)) * time.Millisecond
	}
	watching, stopWatching := context.WithCancel(run)
	view := newMirror(d.book.dial(t, "soak-console"))
	var watcher sync.WaitGroup
	watcher.Go(func() { view.run(watching) })
	operating, stopOperator := context.WithCancel(run)
	var operator sync.WaitGroup
	operator.Go(func() { ld.operator(operating, nextRound) })

	began := time.Now()
	killLoop(d, p, began, rand.New(rand.NewPCG(seed, 2)))
	loaded := time.Since(began)

	// The faults are over: no new workflows, every downstream fixed. What
	// was started must finish, the operator redriving what is dead.
	stopMore()
	gts.all.Store(true)
	starters.Wait()
	settleStart := time.Now()
	settleErr := settle(ld, led, p.settle)
	settled := time.Since(settleStart)
	stopOperator()
	operator.Wait()
	// A console following Watch through every restart shows the same.
	viewErr := view.settled(time.Minute)
	stopWatching()
	watcher.Wait()
	for _, w := range workers {
		w.Stop()
	}

	k := &checker{c: ld.c, ledger: led, sink: snk}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	k.check(ctx)
	k.problems = append(k.problems, ld.unexpected...)
	k.problems = append(k.problems, view.unexpected...)
	if settleErr != nil {
		k.add(stuck, "settle", "", fmt.Sprintf("every workflow and operation finished within %s", p.settle), settleErr.Error())
	}
	if viewErr != nil {
		k.add(stuck, "Watch view", "", "nothing running once everything settled", viewErr.Error())
	}
	d.notePeak()
	if d.peakRSS > rssLimit {
		k.add(memory, "peak RSS", "durabled", fmt.Sprintf("at most %s", mib(rssLimit)), mib(d.peakRSS))
	}
	// After all that, durabled still stops cleanly.
	settledRSS, _ := d.rss.current()
	d.rss.stop()
	if err := d.proc.Signal(syscall.SIGTERM); err != nil {
		k.add(refused, "SIGTERM", "durabled", "a clean stop", err.Error())
	} else if code := d.proc.Wait(); code != 0 {
		k.add(refused, "SIGTERM", "durabled", "exit code 0", fmt.Sprintf("exit code %d", code))
	}
	d.saveLogs("SIGTERM at the end")

	r := &report{
		plan: p, seed: seed, dir: dir, loaded: loaded, settled: settled, daemon: d, ledger: led, view: view,
		tally: k.tally, problems: k.problems, settledRSS: settledRSS, limit: rssLimit,
		errorLines: logLines(d.logPath, "level=ERROR"),
	}
	r.write(t)
}

// runDir makes the run's directory: kept when the run fails (or with
// -soak.keep), removed when it passes.
func runDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "durable-soak-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || *flagKeep {
			t.Logf("soak: kept %s: report.txt, durabled.log (every run, each headed by how it ended), workers.log, data/ (durabled --data), sink/effects.log", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// startWorkers runs two in-process workers against the daemon, wherever it
// listens, their calls recorded in led.
func startWorkers(t *testing.T, book *addressBook, led *ledger, acts *activities, logPath string) []*worker.Worker {
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	logger := slog.New(slog.NewTextHandler(f, nil))
	var out []*worker.Worker
	for i := range 2 {
		id := fmt.Sprintf("soak-worker-%d", i+1)
		c := book.dial(t, id, grpc.WithChainUnaryInterceptor(led.intercept))
		w := worker.New(c, taskQueue, worker.Options{
			MaxConcurrentActivities: 64, MaxConcurrentWorkflowTasks: 8,
			Identity: id, StopTimeout: 2 * time.Second, Logger: logger,
		})
		w.RegisterWorkflowWithName(SoakFlow, flowName)
		w.RegisterActivityWithName(acts.Retry, kindRetry)
		w.RegisterActivityWithName(acts.Beat, kindBeat)
		w.RegisterActivityWithName(acts.Doom, kindDoom)
		w.RegisterActivityWithName(acts.Reject, kindReject)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		out = append(out, w)
	}
	return out
}

// killLoop SIGKILLs durabled p.kills times, once at a random moment of each
// equal slice of the load (never before it served minUptime), and returns
// when the load time is over.
func killLoop(d *daemon, p plan, began time.Time, r *rand.Rand) {
	end := began.Add(p.load)
	slot := p.load / time.Duration(p.kills)
	up := time.Now()
	for i := range p.kills {
		at := began.Add(slot*time.Duration(i) + time.Duration((0.2+0.8*r.Float64())*float64(slot)))
		at = later(at, up.Add(minUptime))
		if !at.Before(end) {
			break
		}
		time.Sleep(time.Until(at))
		d.kill(fmt.Sprintf("kill %d of %d, %s into the load", i+1, p.kills, time.Since(began).Round(time.Millisecond)))
		up = time.Now()
	}
	time.Sleep(time.Until(end))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// settle waits until no workflow runs and no acknowledged operation is
// still releasing, for up to bound.
func settle(ld *load, led *ledger, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for {
		running, err := ld.c.ListWorkflows(ctx, statusRunning)
		busy := len(running)
		if err == nil && busy == 0 {
			led.mu.Lock()
			ops := append([]operationAck(nil), led.operations...)
			led.mu.Unlock()
			for _, a := range ops {
				op, err := ld.c.DescribeOperation(ctx, a.id)
				if err != nil || op.GetState() == durablev1.OperationState_OPERATION_STATE_RUNNING {
					busy++
				}
			}
			if busy == 0 {
				return nil
			}
		}
		if pause(ctx, 200*time.Millisecond) != nil {
			return fmt.Errorf("%d workflows or operations still running (last error: %v)", busy, err)
		}
	}
}
