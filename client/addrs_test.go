package client_test

import (
	"context"
	"crypto/tls"
	"flag"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testcert"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

func TestSplitAddrs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     []string
		wantErr  string
	}{
		{"One", "127.0.0.1:7345", []string{"127.0.0.1:7345"}, ""},
		{"OneTarget", "dns:///durable.internal:7345", []string{"dns:///durable.internal:7345"}, ""},
		{"Two", "h1:7345,h2:7345", []string{"h1:7345", "h2:7345"}, ""},
		{"Spaces", " h1:7345 , h2:7345 ", []string{"h1:7345", "h2:7345"}, ""},
		{"IPv6", "[::1]:7345,h2:7345", []string{"[::1]:7345", "h2:7345"}, ""},
		{"Empty", "", nil, "no daemon address"},
		{"EmptyPart", "h1:7345,,h2:7345", nil, "part 2 is empty"},
		{"TrailingComma", "h1:7345,", nil, "part 2 is empty"},
		{"NoPort", "h1:7345,h2", nil, `part 2, "h2", is not host:port`},
		{"TargetInList", "dns:///h1:7345,h2:7345", nil, "part 1"},
		{"Twice", "h1:7345,h1:7345", nil, "h1:7345 is listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := client.SplitAddrs(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SplitAddrs(%q) = %v, %v; want an error with %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("SplitAddrs(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestAddrFlagRepeatedOrListedAddsNodes(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "" }
	envAddr := func(k string) string {
		if k == "DURABLE_ADDR" {
			return "env:1,env:2"
		}
		return ""
	}
	tests := []struct {
		name    string
		getenv  func(string) string
		args    [][]string // one FlagSet per element, as wf parses its global then its command flags
		want    string
		wantErr string
	}{
		{"Default", env, nil, client.DefaultAddr, ""},
		{"EnvList", envAddr, nil, "env:1,env:2", ""},
		{"FlagReplacesEnv", envAddr, [][]string{{"--addr", "h1:1"}}, "h1:1", ""},
		{"Repeated", envAddr, [][]string{{"--addr", "h1:1", "--addr", "h2:1"}}, "h1:1,h2:1", ""},
		{"RepeatedAndListed", env, [][]string{{"--addr", "h1:1,h2:1", "--addr", "h3:1"}}, "h1:1,h2:1,h3:1", ""},
		{"AcrossFlagSets", env, [][]string{{"--addr", "h1:1"}, {"--addr", "h2:1"}}, "h1:1,h2:1", ""},
		{"BadPart", env, [][]string{{"--addr", "h1:1,,h2:1"}}, "", "part 2 is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := client.ConnectionFromEnv(tt.getenv)
			for _, args := range tt.args {
				fs := flag.NewFlagSet("t", flag.ContinueOnError)
				fs.SetOutput(new(strings.Builder))
				c.RegisterFlags(fs)
				if err := fs.Parse(args); err != nil {
					if tt.wantErr == "" || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("parse %v: %v, want error %q", args, err, tt.wantErr)
					}
					return
				}
			}
			if tt.wantErr != "" {
				t.Fatalf("parse succeeded with Addr %q, want error %q", c.Addr, tt.wantErr)
			}
			if c.Addr != tt.want {
				t.Errorf("Addr = %q, want %q", c.Addr, tt.want)
			}
		})
	}
}

// node is a daemon of its own (engine, in-memory Badger, server) named
// name, served on 127.0.0.1 until stop.
type node struct {
	addr string
	stop func()
}

func startNode(t *testing.T, name string, host string, opts ...grpc.ServerOption) *node {
	t.Helper()
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(st, engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gs := server.New(e, server.Options{Node: name, Logger: slog.New(slog.DiscardHandler)}).NewGRPCServer(opts...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(l)
	}()
	stopped := false
	n := &node{addr: net.JoinHostPort(host, portOf(l.Addr().String()))}
	n.stop = func() {
		if stopped {
			return
		}
		stopped = true
		e.Close()
		gs.Stop()
		<-served
		st.Close()
	}
	t.Cleanup(n.stop)
	return n
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// answeredBy asks c which node answers one call.
func answeredBy(ctx context.Context, c *client.Client) (string, error) {
	r, err := c.Nodes(ctx)
	return r.GetAnsweredBy(), err
}

func TestClientWithTwoAddressesKeepsWorkingWhenOneStops(t *testing.T) {
	t.Parallel()
	a, b := startNode(t, "node-a", "127.0.0.1"), startNode(t, "node-b", "127.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, a.addr+","+b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// Calls are spread over both nodes.
	seen := map[string]bool{}
	for len(seen) < 2 {
		who, err := answeredBy(ctx, c)
		if err != nil {
			t.Fatalf("with both nodes up: %v (answered so far: %v)", err, seen)
		}
		seen[who] = true
	}

	a.stop()
	// Once the client has seen node-a go, every call is answered by node-b.
	// A call racing the stop may fail, and then only as Unavailable, the
	// code workers retry on.
	for streak := 0; streak < 20; {
		who, err := answeredBy(ctx, c)
		switch {
		case err != nil && ctx.Err() != nil:
			t.Fatalf("the client did not settle on node-b: %v", err)
		case err != nil && status.Code(err) != codes.Unavailable:
			t.Fatalf("a call after node-a stopped failed with %v, want success or Unavailable", err)
		case err != nil:
			streak = 0
		case who != "node-b":
			t.Fatalf("a call after node-a stopped was answered by %q", who)
		default:
			streak++
		}
	}

	// A list whose first node is down still dials.
	c2, err := client.Dial(ctx, a.addr+","+b.addr)
	if err != nil {
		t.Fatalf("Dial with one of two nodes down: %v", err)
	}
	defer c2.Close()
	if who, err := answeredBy(ctx, c2); err != nil || who != "node-b" {
		t.Fatalf("after Dial with node-a down: answered by %q, %v; want node-b", who, err)
	}

	// With every node down, Dial says so.
	b.stop()
	if _, err := client.Dial(ctx, a.addr+","+b.addr); err == nil || !strings.Contains(err.Error(), a.addr+","+b.addr) {
		t.Fatalf("Dial with both nodes down = %v, want ErrUnreachable naming the list", err)
	}
}

func TestAddressListOverTLSChecksEachNodeAgainstItsOwnName(t *testing.T) {
	t.Parallel()
	ca := testcert.NewCA(t, "durable test CA")
	dir := t.TempDir()
	serveTLS := func(cn string, hosts ...string) grpc.ServerOption {
		certPEM, keyPEM := ca.Issue(t, cn, hosts...)
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}))
	}
	caFile := ca.WriteFiles(t, dir, "unused", "unused", "unused").CA
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bothAnswer := func(t *testing.T, addrs string, files client.TLSFiles) {
		t.Helper()
		c, err := client.Dial(ctx, addrs, client.WithTLS(files))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		seen := map[string]bool{}
		for len(seen) < 2 {
			who, err := answeredBy(ctx, c)
			if err != nil {
				t.Fatalf("over TLS to %s: %v (answered so far: %v)", addrs, err, seen)
			}
			seen[who] = true
		}
	}

	t.Run("EachNodeItsHost", func(t *testing.T) {
		// Each certificate names only the host its node is dialled by.
		a := startNode(t, "node-a", "localhost", serveTLS("node-a", "localhost"))
		b := startNode(t, "node-b", "127.0.0.1", serveTLS("node-b", "127.0.0.1"))
		bothAnswer(t, a.addr+","+b.addr, client.TLSFiles{CAFile: caFile})
	})
	t.Run("OneServerName", func(t *testing.T) {
		// Both certificates name a service, not a host: --tls-server-name.
		a := startNode(t, "node-a", "127.0.0.1", serveTLS("node-a", "durable.internal"))
		b := startNode(t, "node-b", "localhost", serveTLS("node-b", "durable.internal"))
		bothAnswer(t, a.addr+","+b.addr, client.TLSFiles{CAFile: caFile, ServerName: "durable.internal"})
	})
}
