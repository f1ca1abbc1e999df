package client

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// A daemon address is one host:port, or several separated by commas
// ("node1:7345,node2:7345") for durabled nodes that share one PostgreSQL
// database. One address is dialled as gRPC dials any target: its name
// resolved by DNS, one connection. A list is handed to gRPC as it is, by a
// resolver of its own, and balanced by route.go: a connection to every
// node, the calls about a workflow sent to the node it picks and the others
// (a worker's polls among them) spread round robin over the nodes that are
// up, and a node that goes away dropped at once (its connection breaks) and
// taken back when it answers again. pick_first would fail over too, but
// would send every poll to one node while the others idle.

// listScheme is the scheme of the resolver that hands gRPC a list of
// addresses. Each client registers its own resolver with its connection
// only (grpc.WithResolvers), so the name cannot clash.
const listScheme = "durable-list"

// SplitAddrs splits a daemon address into its parts: "h1:7345,h2:7345" is
// two, "h1:7345" one. Spaces around a part are dropped. A list must name
// each part as host:port, each once; a single address is passed to gRPC as
// it is (so "dns:///durable.internal:7345" works as before).
func SplitAddrs(addr string) ([]string, error) {
	if !strings.Contains(addr, ",") {
		a := strings.TrimSpace(addr)
		if a == "" {
			return nil, errors.New("no daemon address: want host:port, or several separated by commas")
		}
		return []string{a}, nil
	}
	var out []string
	seen := map[string]bool{}
	for i, a := range strings.Split(addr, ",") {
		a = strings.TrimSpace(a)
		switch _, port, err := net.SplitHostPort(a); {
		case a == "":
			return nil, fmt.Errorf("address list %q: part %d is empty", addr, i+1)
		case err != nil || port == "":
			return nil, fmt.Errorf("address list %q: part %d, %q, is not host:port", addr, i+1, a)
		case seen[a]:
			return nil, fmt.Errorf("address list %q: %s is listed twice", addr, a)
		}
		seen[a] = true
		out = append(out, a)
	}
	return out, nil
}

// listDialOptions are the options that make a connection dial every one of
// addrs, balanced by workflow (route.go). Unless the TLS settings name the server for
// all (serverNamed; gRPC then checks every node against that name), each
// address carries its own server name, host:port, so that each node's
// certificate is checked against the host dialled for it.
func listDialOptions(addrs []string, serverNamed bool) []grpc.DialOption {
	r := manual.NewBuilderWithScheme(listScheme)
	eps := make([]resolver.Endpoint, len(addrs))
	ras := make([]resolver.Address, len(addrs))
	for i, a := range addrs {
		ra := resolver.Address{Addr: a}
		if !serverNamed {
			ra.ServerName = a
		}
		ras[i] = ra
		eps[i] = resolver.Endpoint{Addresses: []resolver.Address{ra}}
	}
	// The balancer (grpc's base) reads the addresses; gRPC reads the
	// endpoints.
	r.InitialState(resolver.State{Endpoints: eps, Addresses: ras})
	return []grpc.DialOption{grpc.WithResolvers(r), grpc.WithDefaultServiceConfig(routeConfig), grpc.WithChainUnaryInterceptor(routeByRequest),
		grpc.WithKeepaliveParams(listKeepalive)}
}

// listKeepalive has the client ping each node after listKeepalive.Time
// without a frame from it, and drop the node when the ping is not answered
// within Timeout. A node that stops answering without closing its
// connection (a paused machine, a network cut) would otherwise keep the
// calls of its workflows, and its share of the others, until the
// operating system gave up on the connection: minutes later, if ever
// (a peer whose TCP still acknowledges is never given up). durabled
// accepts a client's pings every 10 s or more (server.go).
var listKeepalive = keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}

// dialTarget is what grpc.NewClient dials for addrs: the address itself, or
// for a list the list resolver, named after the first address so that the
// connection's default authority is a real host:port.
func dialTarget(addrs []string) string {
	if len(addrs) == 1 {
		return addrs[0]
	}
	return listScheme + ":///" + addrs[0]
}
