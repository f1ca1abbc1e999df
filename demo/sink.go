package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tinyllm/durable/demo/sink"
)

const sinkUsage = `Usage: demo sink [--listen ADDR] [--dir DIR]

Serves an effects sink that several demo workers share (demo worker
--sink-addr ADDR). It prints its totals when interrupted.

Flags:
`

// runSink is `demo sink`.
func runSink(args []string) int {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), sinkUsage)
		fs.PrintDefaults()
	}
	listen := fs.String("listen", "127.0.0.1:7346", "address to serve the sink on")
	dir := fs.String("dir", defaultSinkDir(), "directory of the sink's log")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	st, err := sink.Open(*dir)
	if err != nil {
		log.Error("open sink", "err", err)
		return 1
	}
	defer st.Close()
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Error("listen", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: &sink.Server{Store: st}, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("sink listening", "addr", l.Addr().String(), "dir", *dir)
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "err", err)
		return 1
	}
	s := st.Stats()
	log.Info("sink totals", "applied", s.Applied, "deliveries", s.Deliveries, "duplicates", s.Duplicates)
	return 0
}
