package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/client"
)

// dialWait bounds the wait for a connection when the command itself has no
// deadline (watch, start --wait, dlq redrive --wait).
const dialWait = 5 * time.Second

// context returns the context a command runs under: --timeout if given, else
// defaultTimeout, or no limit when unbounded is true (watch, start --wait,
// dlq redrive --wait).
func (c *cli) context(unbounded bool) (context.Context, context.CancelFunc) {
	switch {
	case c.g.timeout > 0:
		return context.WithTimeout(context.Background(), c.g.timeout)
	case unbounded:
		return context.WithCancel(context.Background())
	default:
		return context.WithTimeout(context.Background(), defaultTimeout)
	}
}

// connect is the start of every command that talks to the daemon: the
// command's context (see context) and a client. On success the caller defers
// done; otherwise code is the exit code to return.
func (c *cli) connect(unbounded bool) (ctx context.Context, cl *client.Client, done func(), code int) {
	ctx, cancel := c.context(unbounded)
	cl, code = c.dial(ctx)
	if code >= 0 {
		cancel()
		return nil, nil, nil, code
	}
	return ctx, cl, func() { cl.Close(); cancel() }, -1
}

// dial connects to the daemon as the connection flags say; on failure it
// reports and returns the exit code. Settings that cannot be used (a token
// file or TLS file that does not load, a token and a token file together)
// are usage errors: nothing was tried, and the fix is on this side.
func (c *cli) dial(ctx context.Context) (*client.Client, int) {
	opts, err := c.g.conn.Options()
	if err != nil {
		return nil, c.usageError("", err.Error())
	}
	dctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, dialWait)
		defer cancel()
	}
	cl, err := client.Dial(dctx, c.g.conn.Addr, opts...)
	switch {
	case errors.Is(err, client.ErrConfig):
		return nil, c.usageError("", err.Error())
	case err != nil:
		return nil, c.fail(err)
	}
	return cl, -1
}

// rpcPrefix is the noise gRPC puts in front of a status message.
var rpcPrefix = regexp.MustCompile(`rpc error: code = \w+ desc = `)

// fail prints err as one line on stderr and returns its exit code. A refused
// call keeps the daemon's message, which names the principal, its role and
// the call; an unauthenticated one says what wf sent.
func (c *cli) fail(err error) int {
	code := exitCode(err)
	msg := rpcPrefix.ReplaceAllString(err.Error(), "")
	switch s, _ := status.FromError(err); {
	case code == exitUnreachable:
		msg += " (" + c.unreachableHint() + ")"
	case s.Code() == codes.Unauthenticated:
		if hint := c.tokenHint(); hint != "" {
			msg += " (Unauthenticated: " + hint + ")"
		} else {
			msg += " (Unauthenticated)"
		}
	case s.Code() != codes.Unknown && s.Code() != codes.OK:
		msg += " (" + s.Code().String() + ")"
	}
	fmt.Fprintf(c.stderr, "wf: %s\n", msg)
	return code
}

// unreachableHint says what to check when no connection could be made.
func (c *cli) unreachableHint() string {
	if c.g.conn.UsesTLS() {
		return "check --addr, and --tls-ca and --tls-server-name against the daemon's certificate"
	}
	return "is durabled running? set --addr or DURABLE_ADDR, and --tls if it serves TLS"
}

// tokenHint says which token wf sent, so that a refused one can be traced
// to the flag, variable or file it came from; "" when it sent none.
func (c *cli) tokenHint() string {
	n := c.g.conn
	switch {
	case n.TokenFile != "":
		return "wf sent the token in " + n.TokenFile
	case n.Token == "":
		return "" // the daemon's message says how to send one
	case n.Token == getenv("DURABLE_TOKEN"):
		return "wf sent the token of DURABLE_TOKEN"
	default:
		return "wf sent the token of --token"
	}
}

// exitCode maps an error to the exit code scripts see.
func exitCode(err error) int {
	if errors.Is(err, client.ErrUnreachable) {
		return exitUnreachable
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unavailable {
		return exitUnreachable
	}
	return exitFailed
}
