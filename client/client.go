package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// DefaultAddr is where durabled listens unless told otherwise.
const DefaultAddr = "127.0.0.1:7345"

// dialWait bounds how long Dial waits for the daemon when ctx has no deadline.
const dialWait = 5 * time.Second

// maxRecvMsgSize bounds one reply: a workflow task's history can hold many
// payloads of up to the daemon's --max-payload each.
const maxRecvMsgSize = 256 << 20

// ErrUnreachable is wrapped by the error Dial returns when no connection to
// the daemon could be made; callers check it with errors.Is (wf exits 3 on it).
var ErrUnreachable = errors.New("durable daemon unreachable")

// ErrConfig is wrapped by the errors of Dial, New and Connection.Options
// when the options themselves cannot be used: TLS files that do not load, a
// token file that cannot be read, a malformed address. Nothing was sent;
// the fix is on the caller's side (wf exits 2 on it).
var ErrConfig = errors.New("client settings")

// Option configures Dial.
type Option func(*options)

type options struct {
	converter DataConverter
	dialOpts  []grpc.DialOption
	identity  string
	token     string
	tls       *TLSFiles
	tlsConfig *tls.Config
	err       error // an option that could not be applied
}

// WithConverter replaces the JSON payload converter.
func WithConverter(dc DataConverter) Option {
	return func(o *options) { o.converter = dc }
}

// WithDialOptions adds gRPC dial options, for example TLS credentials, which
// replace the default insecure transport.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, opts...) }
}

// WithIdentity names this process in history and describe output; default
// "host:pid".
func WithIdentity(id string) Option {
	return func(o *options) { o.identity = id }
}

// Client is a connection to one daemon. It is safe for concurrent use; share
// one per process.
type Client struct {
	conn      *grpc.ClientConn
	svc       durablev1.DurableClient
	converter DataConverter
	identity  string
}

// Dial connects to the daemon at addr (host:port, or several separated by
// commas: see SplitAddrs) and waits until the connection is up, to one node
// of a list at least. It fails fast, with an error wrapping ErrUnreachable,
// if the daemon (every node of a list) refuses the connection or ctx ends
// first; without a ctx deadline it waits at most 5 s. A TLS handshake the daemon refuses (or that finds a
// certificate it cannot verify) is ErrUnreachable too, with the reason.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	c, err := New(addr, opts...)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialWait)
		defer cancel()
	}
	if err := waitReady(ctx, c.conn); err != nil {
		c.conn.Close()
		return nil, fmt.Errorf("%w at %s: %v", ErrUnreachable, addr, err)
	}
	return c, nil
}

// New returns a client of the daemon at addr without waiting for it: the
// connection is made on the first call and remade after failures, so a
// console can start before its daemon. It fails only on options that cannot
// be applied, such as TLS files that do not load or a malformed address
// list. A list of addresses ("h1:7345,h2:7345", nodes of one database) is
// balanced over the nodes that are up: a call about a workflow goes to the
// node its id picks (route.go, ForWorkflow), the other calls round robin.
func New(addr string, opts ...Option) (*Client, error) {
	addrs, err := SplitAddrs(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	o := options{converter: JSON}
	for _, opt := range opts {
		opt(&o)
	}
	if o.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, o.err)
	}
	if o.identity == "" {
		o.identity = DefaultIdentity()
	}
	creds, err := o.transport()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// A workflow task carries the whole history, which holds every
		// input and result: far more than gRPC's default 4 MiB reply.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize)),
	}
	if o.token != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearer(o.token)))
	}
	if len(addrs) > 1 {
		dialOpts = append(dialOpts, listDialOptions(addrs, creds.Info().ServerName != "")...)
	}
	conn, err := grpc.NewClient(dialTarget(addrs), append(dialOpts, o.dialOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", ErrConfig, addr, err)
	}
	return &Client{
		conn:      conn,
		svc:       durablev1.NewDurableClient(conn),
		converter: o.converter,
		identity:  o.identity,
	}, nil
}

// waitReady connects and returns once the connection is ready, or an error
// at the first transient failure (a refused connection, a failed TLS
// handshake) or when ctx ends.
func waitReady(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure:
			return connectError(ctx, conn)
		case connectivity.Shutdown:
			return errors.New("connection shut down")
		}
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}

// DefaultIdentity returns "host:pid", the identity used when none is given.
func DefaultIdentity() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

// Close closes the connection. Calls in flight fail with Canceled.
func (c *Client) Close() error { return c.conn.Close() }

// Service returns the raw gRPC stub, for calls this package does not wrap.
func (c *Client) Service() durablev1.DurableClient { return c.svc }

// Converter returns the payload converter; workers use the client's.
func (c *Client) Converter() DataConverter { return c.converter }

// Identity returns the identity this client reports to the daemon.
func (c *Client) Identity() string { return c.identity }
