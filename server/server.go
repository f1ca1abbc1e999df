package server

import (
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// DefaultMaxPayload is the default bound on a single payload (an input, a
// result, heartbeat or failure details): 2 MiB.
const DefaultMaxPayload = 2 << 20

// Options configure a Server. Zero fields take the defaults named on them.
type Options struct {
	// MaxPayload bounds every single payload of a request in bytes; a larger
	// one is rejected with InvalidArgument naming the field. Default
	// DefaultMaxPayload.
	MaxPayload int
	// Logger receives errors the server could not map to a status code other
	// than Internal; default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxPayload <= 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Server implements durablev1.DurableServer over an engine. Create it with New
// and attach it to a grpc.Server with Register.
type Server struct {
	durablev1.UnimplementedDurableServer

	engine *engine.Engine
	opts   Options
}

// New returns a Server that validates requests and hands them to e.
func New(e *engine.Engine, opts Options) *Server {
	return &Server{engine: e, opts: opts.withDefaults()}
}

// Register attaches the Durable service to r, typically a *grpc.Server built
// with GRPCOptions.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	durablev1.RegisterDurableServer(r, s)
}

// GRPCOptions returns the grpc.Server options that match opts. The receive
// limit leaves room for several payloads of MaxPayload in one message (a
// workflow task completion carries one input per command) plus the rest of
// the message, so the per-field check, not the transport, is what rejects an
// oversized payload with a message naming the field. Keepalive pings find
// connections of vanished workers that hold long polls, and clients may ping
// every 10 s without being cut off.
func GRPCOptions(opts Options) []grpc.ServerOption {
	opts = opts.withDefaults()
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxRecvMsgSize(opts.MaxPayload)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}

// maxRecvMsgSize is 4 payloads plus 1 MiB of headroom, capped below 2 GiB so
// it fits a 32-bit int on every platform.
func maxRecvMsgSize(maxPayload int) int {
	const headroom = 1 << 20
	const limit = 1<<31 - 1
	if maxPayload > (limit-headroom)/4 {
		return limit
	}
	return 4*maxPayload + headroom
}
