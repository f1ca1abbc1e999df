package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

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
func serve(cfg config, logger *slog.Logger) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if err := os.MkdirAll(cfg.data, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	store, err := badgerstore.Open(cfg.data, badgerstore.Options{
		NoSync: cfg.noSync,
		Logger: logger.With("component", "badger"),
	})
	if err != nil {
		return fmt.Errorf("open store %s: %w", cfg.data, err)
	}
	defer func() {
		if cerr := store.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close store: %w", cerr))
		}
	}()
	eng, err := engine.New(store, engine.Options{
		Seed:                cfg.seed,
		DLQAfterAttempts:    cfg.dlqAfterAttempts,
		WorkflowTaskTimeout: cfg.workflowTaskTimeout,
		Logger:              logger.With("component", "engine"),
	})
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	defer eng.Close() // idempotent; covers the early returns below

	opts := server.Options{MaxPayload: cfg.maxPayload, Logger: logger.With("component", "server")}
	gs := server.New(eng, opts).NewGRPCServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	reflection.Register(gs)

	lis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(durablev1.Durable_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	logger.Info("listening", "addr", lis.Addr().String(), "data", cfg.data, "no_sync", cfg.noSync)

	select {
	case <-ctx.Done():
		logger.Info("shutting down", "grace", cfg.shutdownTimeout)
	case serr := <-served:
		hs.Shutdown()
		gs.Stop()
		return fmt.Errorf("serve: %w", serr)
	}
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
