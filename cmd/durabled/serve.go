package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
)

// serve opens the store and the engine, serves until SIGTERM or SIGINT, then
// shuts down in order: health NOT_SERVING, no new calls, long polls answered,
// running calls drained (bounded), store closed.
func serve(cfg config, tr *trust, logger *slog.Logger) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if err := os.MkdirAll(cfg.data, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	mem, err := badgerstore.MemoryFor(cfg.memoryBudget)
	if err != nil {
		return err
	}
	goLimit := "GOMEMLIMIT"
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(mem.GoLimit)
		goLimit = formatBytes(mem.GoLimit)
	}
	store, err := badgerstore.Open(cfg.data, badgerstore.Options{
		NoSync: cfg.noSync,
		Logger: logger.With("component", "badger"),
		Memory: mem,
	})
	if err != nil {
		return fmt.Errorf("open store %s: %w", cfg.data, err)
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close store: %w", cerr))
		}
	}()
	// The key is read once the store holds the data directory's lock, so
	// two daemons can never race to create it.
	keyPath := filepath.Join(cfg.data, server.TokenKeyFile)
	key, exposed, err := server.LoadTokenKey(keyPath)
	if err != nil {
		return err
	}
	if exposed {
		logger.Warn("the task token key can be read by other users; anyone who reads it can forge task tokens: chmod 600 it", "path", keyPath)
	}
	var metrics *server.Metrics
	var observer engine.Observer
	if cfg.metricsListen != "" {
		metrics = server.NewMetrics()
		observer = metrics
	}
	eng, err := engine.New(store, engine.Options{
		Seed:                cfg.seed,
		DLQAfterAttempts:    cfg.dlqAfterAttempts,
		WorkflowTaskTimeout: cfg.workflowTaskTimeout,
		AuditRetention:      cfg.auditRetention,
		StatsRetention:      cfg.statsRetention,
		AttemptRetention:    cfg.attemptRetention,
		Observer:            observer,
		Logger:              logger.With("component", "engine"),
	})
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	defer eng.Close() // idempotent; covers the early returns below

	opts := server.Options{
		MaxPayload: cfg.maxPayload,
		Logger:     logger.With("component", "server"),
		Auth:       tr.auth,
		TokenKey:   key,
		Metrics:    metrics,
	}
	gs := server.New(eng, opts).NewGRPCServer(tr.creds...)
	hs := health.NewServer()
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
		msrv := &http.Server{Handler: metricsMux(metrics, &serving), ReadHeaderTimeout: 10 * time.Second}
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
	logger.Info("listening", "addr", lis.Addr().String(), "data", cfg.data, "no_sync", cfg.noSync,
		"tls", cfg.tlsCert != "", "mtls", tr.mtls, "auth", cfg.auth != "", "principals", principals,
		"memory_budget", formatBytes(mem.Budget), "go_memory_limit", goLimit)

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
// balancers that speak HTTP.
func metricsMux(m *server.Metrics, serving *atomic.Bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !serving.Load() {
			http.Error(w, "not serving", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
