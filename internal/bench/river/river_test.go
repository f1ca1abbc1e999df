// Package river measures River (github.com/riverqueue/river) on the same
// throwaway PostgreSQL server, with the same settings, as
// internal/bench's -bench.store=postgres runs durable on: the anchor that
// durable's throughput goals are set against, re-measured on the machine at
// hand instead of quoted from another day.
//
// It is a module of its own so that River is not a dependency of durable.
// Run it from this directory:
//
//	go test -run '^$' -bench 'RiverThroughput/(Succeed|FailOnce)$' -benchtime 20000x
//
// The shape is BenchmarkActivityThroughput's: b.N no-op jobs, 32 running at
// once (-river.workers), every state change durable before it is
// acknowledged (fsync and synchronous_commit on). Jobs are inserted 50 to
// a call, as durable's driver starts one workflow per 50 activities, and a
// job counts once River reports it completed, which it does after the
// completion is committed. FailOnce fails every first attempt and retries
// after a delay drawn from [0, 1 ms), as durable's benchmark does.
package river

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/tinyllm/durable/internal/proccpu"
	"github.com/tinyllm/durable/internal/testpg"
)

var (
	workers       = flag.Int("river.workers", 32, "jobs River runs at once")
	fetchCooldown = flag.Duration("river.fetch-cooldown", time.Millisecond, "River's FetchCooldown: the least time between two fetches")
	fetchPoll     = flag.Duration("river.fetch-poll", 10*time.Millisecond, "River's FetchPollInterval: how often it fetches without a notification")
	poolConns     = flag.Int("river.conns", 0, "connections in River's pool (0: pgxpool's default, the larger of 4 and the CPUs)")
)

// perCall is how many jobs one insert carries.
const perCall = 50

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	server.Stop()
	os.Exit(code)
}

// The PostgreSQL server of the test binary, started on first use.
var server testpg.Lazy

// BenchmarkRiverThroughput runs b.N jobs through River and reports jobs per
// second and the CPU time the benchmark's process (River's client, its
// workers and the inserts) and the PostgreSQL server spent per job.
func BenchmarkRiverThroughput(b *testing.B) {
	b.Run("Succeed", func(b *testing.B) { benchRiver(b, false) })
	b.Run("FailOnce", func(b *testing.B) { benchRiver(b, true) })
}

// noopArgs are the arguments of the benchmark's job.
type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

// noopWorker does nothing, or fails a job's first attempt.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	failOnce bool
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if w.failOnce && job.Attempt == 1 {
		return errors.New("first attempt")
	}
	return nil
}

// retrySoon retries a failed job after a delay drawn from [0, 1 ms).
type retrySoon struct{}

func (retrySoon) NextRetry(*rivertype.JobRow) time.Time {
	return time.Now().Add(rand.N(time.Millisecond))
}

func benchRiver(b *testing.B, failOnce bool) {
	srv := server.Get(b)
	dsn := srv.CreateDatabase(b)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	if *poolConns > 0 {
		cfg.MaxConns = int32(*poolConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	// The pool closes before the database is dropped (cleanups run last
	// registered first).
	b.Cleanup(pool.Close)
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}

	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{failOnce: failOnce})
	client, err := river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *workers}},
		Workers:           ws,
		FetchCooldown:     *fetchCooldown,
		FetchPollInterval: *fetchPoll,
		RetryPolicy:       retrySoon{},
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	// River drops an event when a subscriber's channel is full, so the
	// channel holds every job's.
	completed, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: b.N + 1, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancel()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stopCtx, stop := context.WithTimeout(ctx, 30*time.Second)
		defer stop()
		if err := client.Stop(stopCtx); err != nil {
			b.Errorf("stopping River: %v", err)
		}
	}()

	params := make([]river.InsertManyParams, perCall)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	pgPID := srv.Pid()
	b.ResetTimer()
	start, selfStart, dbStart := time.Now(), proccpu.Self(), proccpu.Tree(pgPID)
	for left := b.N; left > 0; left -= perCall {
		if _, err := client.InsertManyFast(ctx, params[:min(left, perCall)]); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.NewTimer(5 * time.Minute)
	defer deadline.Stop()
	for done := 0; done < b.N; done++ {
		select {
		case <-completed:
		case <-deadline.C:
			b.Fatalf("%d of %d jobs completed in 5 minutes", done, b.N)
		}
	}
	elapsed, self, db := time.Since(start), proccpu.Self()-selfStart, proccpu.Tree(pgPID)-dbStart
	b.StopTimer()

	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(per(self+db), "cpu-µs/job")
	b.ReportMetric(per(db), "db-cpu-µs/job")
	checkAttempts(b, pool, failOnce)
}

// checkAttempts fails b unless every job completed after the attempts its
// shape gives it: one, or two when every first attempt fails.
func checkAttempts(b *testing.B, pool *pgxpool.Pool, failOnce bool) {
	want := 1
	if failOnce {
		want = 2
	}
	var total, right int
	err := pool.QueryRow(context.Background(),
		`SELECT count(*), count(*) FILTER (WHERE state = 'completed' AND attempt = $1) FROM river_job`, want).Scan(&total, &right)
	if err != nil {
		b.Fatal(err)
	}
	if total != b.N || right != b.N {
		b.Fatalf("%d jobs, %d of them completed after %d attempts; want %d", total, right, want, b.N)
	}
}
