package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
	pgstore "github.com/tinyllm/durable/store/postgres"
)

// serve opens the store and the engine, serves until SIGTERM or SIGINT, then
// shuts down in order: health NOT_SERVING, no new calls, long polls answered,
// running calls drained (bounded), store closed.
func serve(cfg config, tr *trust, logger *slog.Logger) (err error) {
	started := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var metrics *server.Metrics
	var observer engine.Observer
	if cfg.metricsListen != "" {
		metrics = server.NewMetrics()
		observer = metrics
	}
	aliveWithin := server.DefaultNodeAliveWithin
	var (
		store engine.Store
		key   []byte
		disk  *diskWatch
		roErr error
		mem   badgerstore.Memory
	)
	if cfg.store == storePostgres {
		pg, err := openPostgres(ctx, cfg, logger)
		if err != nil {
			return err
		}
		store = pg
		aliveWithin = pgstore.AliveWithin
		if key, err = pg.TokenKey(server.NewTokenKey()); err != nil {
			pg.Close()
			return err
		}
	} else {
		if err := os.MkdirAll(cfg.data, 0o700); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
		if mem, err = badgerstore.MemoryFor(cfg.memoryBudget); err != nil {
			return err
		}
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(mem.GoLimit)
		}
		storeOpts := badgerstore.Options{
			NoSync: cfg.noSync,
			Logger: logger.With("component", "badger"),
			Memory: mem,
		}
		disk = checkDiskAtStart(cfg, storeOpts, metrics, logger)
		roErr = disk.readOnly
		storeOpts.ReadOnly = roErr != nil
		storeOpts.WroteFunc = func(n int) { disk.mon.Wrote(n) }
		bs, err := badgerstore.Open(cfg.data, storeOpts)
		if err != nil && roErr != nil {
			ds := disk.mon.Status()
			return fmt.Errorf("not enough disk space to start: %s free of %s on the volume of %s, below the disk reserve of %s, and no store there that opens read-only (%w): free space on that volume (or lower --disk-reserve, at your own risk) and start again",
				badgerstore.FormatSize(ds.Free), badgerstore.FormatSize(ds.Total), ds.Dir, badgerstore.FormatSize(ds.Reserve), err)
		}
		if err != nil {
			return fmt.Errorf("open store %s: %w", cfg.data, err)
		}
		store = bs
		if roErr != nil {
			ds := disk.mon.Status()
			logger.Error("disk full at start: the store is open read-only; reads, Watch and polls are served, changes of state are refused",
				"free", badgerstore.FormatSize(ds.Free), "total", badgerstore.FormatSize(ds.Total),
				"reserve", badgerstore.FormatSize(ds.Reserve), "data", ds.Dir,
				"what_to_do", "free space on that volume, then restart durabled to take writes again (or restart it with a lower --disk-reserve, at your own risk)")
		}
		// The key is read once the store holds the data directory's lock, so
		// two daemons can never race to create it.
		if key, err = loadTokenKey(cfg.data, roErr != nil, logger); err != nil {
			store.Close()
			return err
		}
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close store: %w", cerr))
		}
	}()
	hs := health.NewServer()
	var writeFailed func(error)
	if disk != nil {
		writeFailed = disk.writeFailed
	}
	eng, err := engine.New(store, engine.Options{
		Seed:                cfg.seed,
		DLQAfterAttempts:    cfg.dlqAfterAttempts,
		WorkflowTaskTimeout: cfg.workflowTaskTimeout,
		AuditRetention:      cfg.auditRetention,
		StatsRetention:      cfg.statsRetention,
		AttemptRetention:    cfg.attemptRetention,
		MaxWatchers:         cfg.maxWatchers,
		Observer:            observer,
		Logger:              logger.With("component", "engine"),
		ReadOnly:            roErr,
		WriteFailedFunc:     writeFailed,
		WritesChangedFunc:   writesHealth(hs),
	})
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	defer eng.Close() // idempotent; covers the early returns below
	if disk != nil {
		disk.attach(eng)
		diskCtx, stopDisk := context.WithCancel(ctx)
		defer stopDisk()
		go disk.run(diskCtx)
	}

	opts := server.Options{
		MaxPayload: cfg.maxPayload,
		Logger:     logger.With("component", "server"),
		Auth:       tr.auth,
		TokenKey:   key,
		Metrics:    metrics,

		Node:            cfg.node,
		NodeStarted:     started,
		NodeAliveWithin: aliveWithin,
	}
	gs := server.New(eng, opts).NewGRPCServer(tr.creds...)
	healthpb.RegisterHealthServer(gs, hs)
	if cfg.reflection {
		reflection.Register(gs)
	}

	lis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var serving atomic.Bool
	if cfg.metricsListen != "" {
		mlis, err := net.Listen("tcp", cfg.metricsListen)
		if err != nil {
			lis.Close()
			return fmt.Errorf("metrics listen: %w", err)
		}
		msrv := &http.Server{Handler: metricsMux(metrics, &serving, eng.WritesRefused), ReadHeaderTimeout: 10 * time.Second}
		go msrv.Serve(mlis)
		defer msrv.Close()
		logger.Info("serving metrics", "addr", mlis.Addr().String())
	}
	hupDone := make(chan struct{})
	defer close(hupDone)
	tr.reloadOnHUP(logger, hupDone)

	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(durablev1.Durable_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	serving.Store(true)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	principals := 0
	if tr.auth != nil {
		principals = tr.auth.Identities().Len()
	}
	where := []any{"store", cfg.store}
	if disk != nil {
		ds := disk.mon.Status()
		where = append(where, "data", cfg.data, "no_sync", cfg.noSync,
			"disk_free", ds.Free, "disk_reserve", ds.Reserve, "read_only", roErr != nil,
			"memory_budget", mem.Budget)
	} else {
		where = append(where, "database", pgDatabase(cfg.postgresDSN))
	}
	logger.Info("listening", append([]any{"addr", lis.Addr().String(), "node", cfg.node}, append(where,
		"tls", cfg.tlsCert != "", "mtls", tr.mtls, "auth", cfg.auth != "", "principals", principals,
		"go_memory_limit", goMemoryLimit())...)...)

	select {
	case <-ctx.Done():
		logger.Info("shutting down", "grace", cfg.shutdownTimeout)
	case serr := <-served:
		serving.Store(false)
		hs.Shutdown()
		gs.Stop()
		return fmt.Errorf("serve: %w", serr)
	}
	serving.Store(false)
	hs.Shutdown()
	drained := make(chan struct{})
	go func() {
		gs.GracefulStop() // closes the listener at once, then waits for calls
		close(drained)
	}()
	if err := eng.Close(); err != nil {
		logger.Warn("engine close", "err", err)
	}
	select {
	case <-drained:
	case <-time.After(cfg.shutdownTimeout):
		logger.Warn("calls still running after the grace period; cutting them off", "grace", cfg.shutdownTimeout)
		gs.Stop()
		<-drained
	}
	if serr := <-served; serr != nil && !errors.Is(serr, grpc.ErrServerStopped) {
		logger.Warn("serve", "err", serr)
	}
	logger.Info("stopped")
	return nil
}

// metricsMux serves /metrics (Prometheus text) and /healthz, which answers
// 200 while the daemon serves and 503 once it is shutting down, for load
// balancers that speak HTTP; /healthz/writes answers 503 with the reason
// also while changes of state are refused (a full disk).
func metricsMux(m *server.Metrics, serving *atomic.Bool, writesRefused func() error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !serving.Load() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/healthz/writes", func(w http.ResponseWriter, _ *http.Request) {
		switch err := writesRefused(); {
		case !serving.Load():
			http.Error(w, "not serving", http.StatusServiceUnavailable)
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	return mux
}

// checkDiskAtStart reads the free space of the data volume before the store
// opens. Below the reserve, the watch it returns says the store must open
// read-only (readOnly is the error every change of state will be refused
// with): opening it for writing creates files a full volume cannot back.
func checkDiskAtStart(cfg config, storeOpts badgerstore.Options, metrics *server.Metrics, logger *slog.Logger) *diskWatch {
	reserve := badgerstore.DefaultReserve(storeOpts)
	if cfg.diskReserve != nil {
		reserve = *cfg.diskReserve
	}
	dir := cfg.data
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // messages name the volume for an operator to find
	}
	disk := newDiskWatch(dir, reserve, metrics, logger)
	first := disk.mon.Check()
	if first.Err != nil {
		logger.Warn("cannot read the free space of the data volume: the disk reserve is not enforced", "data", cfg.data, "err", first.Err)
		return disk
	}
	if floor := badgerstore.MinReserve(storeOpts); first.Reserve < floor {
		logger.Warn("the disk reserve is below what the store may still write once writes stop: a full disk may crash durabled (SIGBUS)",
			"reserve", badgerstore.FormatSize(first.Reserve), "store_needs", badgerstore.FormatSize(floor))
	}
	if first.Short {
		disk.readOnly = readOnlyRefusal(first)
	}
	return disk
}

// loadTokenKey reads the task token key of the data directory, creating it
// on first use. A store opened read-only hands out no tasks, so when there
// is no key yet (and no room to write one) a key for this run serves.
func loadTokenKey(dir string, readOnly bool, logger *slog.Logger) ([]byte, error) {
	keyPath := filepath.Join(dir, server.TokenKeyFile)
	if _, err := os.Stat(keyPath); readOnly && errors.Is(err, fs.ErrNotExist) {
		return server.NewTokenKey(), nil
	}
	key, exposed, err := server.LoadTokenKey(keyPath)
	if err != nil {
		return nil, err
	}
	if exposed {
		logger.Warn("the task token key can be read by other users; anyone who reads it can forge task tokens: chmod 600 it", "path", keyPath)
	}
	return key, nil
}

// goMemoryLimit is the Go runtime's soft memory limit for the listening
// line: its bytes, or "none" when nothing set one (PostgreSQL has no memory
// budget, and the runtime then reports the largest int64).
func goMemoryLimit() any {
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return l
	}
	return "none"
}
