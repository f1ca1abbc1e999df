package server

import (
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// DefaultMaxPayload is the default bound on a single payload (an input, a
// result, heartbeat or failure details): 2 MiB.
const DefaultMaxPayload = 2 << 20

// WritesHealthService is the name under which the gRPC health service
// reports whether durabled takes changes of state: NOT_SERVING while they
// are refused (the disk is below its reserve, the store was opened
// read-only, or a sync failed), while "" and the Durable service stay
// SERVING for reads, Watch and polls.
const WritesHealthService = "durable.v1.Durable/writes"

// Options configure a Server. Zero fields take the defaults named on them.
type Options struct {
	// MaxPayload bounds every single payload of a request in bytes; a larger
	// one is rejected with InvalidArgument naming the field. Default
	// DefaultMaxPayload.
	MaxPayload int
	// Logger receives errors the server could not map to a status code other
	// than Internal, and refused calls; default slog.Default().
	Logger *slog.Logger
	// Auth authenticates every call and decides what its principal may do.
	// Nil means no auth: every call runs as LocalPrincipal, an operator,
	// which is only safe on loopback.
	Auth *Auth
	// TokenKey is the key task tokens are sealed with, TokenKeySize bytes;
	// default a random key for this Server only, so its tokens die with it.
	// durabled keeps its key in the data directory (LoadTokenKey).
	TokenKey []byte
	// Metrics, when set, counts every RPC by method and code and reads the
	// engine's gauges. Give the same Metrics to the engine as its Observer.
	Metrics *Metrics
	// Node names this daemon among the nodes of its store (durabled
	// --node; see CheckNodeName), NodeStarted is when it started and
	// NodeAliveWithin the store's liveness rule: ListNodes and the metrics
	// report them. Defaults: DefaultNodeName(), the time New ran, and
	// DefaultNodeAliveWithin.
	Node            string
	NodeStarted     time.Time
	NodeAliveWithin time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxPayload <= 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if len(o.TokenKey) == 0 {
		o.TokenKey = NewTokenKey()
	}
	if o.Node == "" {
		o.Node = DefaultNodeName()
	}
	if o.NodeStarted.IsZero() {
		o.NodeStarted = time.Now()
	}
	if o.NodeAliveWithin <= 0 {
		o.NodeAliveWithin = DefaultNodeAliveWithin
	}
	return o
}

// Server implements durablev1.DurableServer over an engine. Create it with New
// and serve it with NewGRPCServer.
type Server struct {
	durablev1.UnimplementedDurableServer

	engine    *engine.Engine
	opts      Options
	deniedLog onceASecond
}

// New returns a Server that authenticates, authorizes and validates requests
// and hands them to e.
func New(e *engine.Engine, opts Options) *Server {
	s := &Server{engine: e, opts: opts.withDefaults()}
	if s.opts.Metrics != nil {
		s.opts.Metrics.attach(e, s.self())
	}
	return s
}

// NewGRPCServer returns a grpc.Server that serves the Durable service:
// metrics (when configured) and authentication run before every handler of
// every service on it, and its limits match the Options. extra adds options,
// such as TLS credentials. Register health and, if wanted, reflection on the
// result before serving; health stays open to callers without credentials.
func (s *Server) NewGRPCServer(extra ...grpc.ServerOption) *grpc.Server {
	unary := []grpc.UnaryServerInterceptor{}
	stream := []grpc.StreamServerInterceptor{}
	if m := s.opts.Metrics; m != nil {
		u, st := m.interceptors()
		unary, stream = append(unary, u), append(stream, st)
	}
	codec := newRequestCodec()
	unary = append(unary, codec.refuseUndecodable, s.unaryInterceptor)
	stream = append(stream, s.streamInterceptor)
	opts := append(grpcOptions(s.opts),
		grpc.ForceServerCodecV2(codec),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	)
	gs := grpc.NewServer(append(opts, extra...)...)
	durablev1.RegisterDurableServer(gs, s)
	if m := s.opts.Metrics; m != nil {
		m.rpc.InitializeMetrics(gs)
	}
	return gs
}

// Register attaches the Durable service to r without the interceptors of
// NewGRPCServer: with Options.Auth set, every call is then refused.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	durablev1.RegisterDurableServer(r, s)
}

// grpcOptions returns the grpc.Server options that match opts. The receive
// limit leaves room for several payloads of MaxPayload in one message (a
// workflow task completion carries one input per command) plus the rest of
// the message, so the per-field check, not the transport, is what rejects an
// oversized payload with a message naming the field. Keepalive pings find
// connections of vanished workers that hold long polls, and clients may ping
// every 10 s without being cut off.
//
// Calls run on a pool of long-lived goroutines (NumStreamWorkers) rather than
// on a goroutine started per call: a fresh goroutine grows its stack, by
// copying, to the depth of a call through the engine at every call, which
// cost about 3 % of the daemon's CPU under load (issue 12). A call that finds
// every worker busy, as a parked long poll keeps one, still gets a goroutine
// of its own.
func grpcOptions(opts Options) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.NumStreamWorkers(streamWorkers),
		grpc.MaxRecvMsgSize(maxRecvMsgSize(opts.MaxPayload)),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}

// streamWorkers is the number of goroutines kept to serve calls
// (grpcOptions): enough for the parked polls and the calls running beside
// them of a few busy workers. Calls beyond it get a goroutine each, as
// without the pool.
var streamWorkers uint32 = 64

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

// onceASecond lets an event through at most once a second and counts the
// ones it held back.
type onceASecond struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether to log now, and how many were held back since the
// last time it did.
func (o *onceASecond) allow() (int, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	if now.Sub(o.last) < time.Second {
		o.suppressed++
		return 0, false
	}
	n := o.suppressed
	o.last, o.suppressed = now, 0
	return n, true
}
