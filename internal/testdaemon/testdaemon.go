// Package testdaemon runs durable daemons for tests: Start runs the real
// engine over an in-memory Badger store inside the test process, served over
// gRPC on a free local port; Exec runs the durabled binary as a process of its
// own, for tests that kill it or read its flags. Tests of the SDK, the CLI
// and the console use it; production code must not import it.
package testdaemon

import (
	"log/slog"
	"net"
	"testing"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// Start runs a daemon for the duration of t and returns its address
// (127.0.0.1:port). Everything is torn down in t.Cleanup. opts.Logger
// defaults to a logger that discards, to keep test output readable.
func Start(t testing.TB, opts engine.Options) (addr string) {
	t.Helper()
	return StartServer(t, opts, server.Options{})
}

// StartServer is Start with server options, such as an Auth of test
// principals.
func StartServer(t testing.TB, opts engine.Options, srvOpts server.Options) (addr string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatalf("testdaemon: open store: %v", err)
	}
	eng, err := engine.New(st, opts)
	if err != nil {
		st.Close()
		t.Fatalf("testdaemon: new engine: %v", err)
	}
	if srvOpts.Logger == nil {
		srvOpts.Logger = opts.Logger
	}
	gs := server.New(eng, srvOpts).NewGRPCServer()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		eng.Close()
		st.Close()
		t.Fatalf("testdaemon: listen: %v", err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(l)
	}()
	t.Cleanup(func() {
		eng.Close() // answers waiting long polls so Stop does not hang
		gs.Stop()
		<-served
		st.Close()
	})
	return l.Addr().String()
}
