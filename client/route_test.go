package client_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// callLog records which node served each call that names a workflow.
type callLog struct {
	mu    sync.Mutex
	nodes map[string]map[string]bool // workflow id → nodes that served a call about it
}

func (l *callLog) interceptor(node string) grpc.ServerOption {
	return grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if r, ok := req.(interface{ GetWorkflowId() string }); ok && r.GetWorkflowId() != "" {
			l.mu.Lock()
			if l.nodes[r.GetWorkflowId()] == nil {
				l.nodes[r.GetWorkflowId()] = map[string]bool{}
			}
			l.nodes[r.GetWorkflowId()][node] = true
			l.mu.Unlock()
		}
		return handler(ctx, req)
	})
}

// servedBy returns the one node that served the calls about id, or fails.
func (l *callLog) servedBy(t *testing.T, id string) string {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.nodes[id]) != 1 {
		t.Fatalf("calls about %s were served by %v, want one node", id, l.nodes[id])
	}
	for n := range l.nodes[id] {
		return n
	}
	return ""
}

func (l *callLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes = map[string]map[string]bool{}
}

// TestClientWithSeveralAddressesSendsEachWorkflowsCallsToOneNode: a
// client of three nodes sends every call about one workflow (named in the
// request, or by ForWorkflow for a call whose request does not name it)
// through one node, spreads the workflows over the nodes, and when a node
// stops moves only that node's workflows.
func TestClientWithSeveralAddressesSendsEachWorkflowsCallsToOneNode(t *testing.T) {
	t.Parallel()
	log := &callLog{}
	log.reset()
	names := []string{"node-a", "node-b", "node-c"}
	nodes := map[string]*node{}
	var addrs string
	for _, name := range names {
		n := startNode(t, name, "127.0.0.1", log.interceptor(name))
		nodes[name] = n
		if addrs != "" {
			addrs += ","
		}
		addrs += n.addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addrs)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Until the client has a connection to every node, calls go to those
	// it has: wait until the calls that name no workflow reach all three.
	seen := map[string]bool{}
	for len(seen) < 3 {
		who, err := answeredBy(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		seen[who] = true
	}

	ids := make([]string, 30)
	call := func(id string) {
		t.Helper()
		// A workflow that does not exist: any node answers NotFound, and
		// the interceptor has seen the call.
		if _, err := c.Service().DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: id}); err == nil {
			t.Fatalf("DescribeWorkflow(%s) found a workflow", id)
		}
	}
	byNode := map[string]int{}
	before := map[string]string{}
	for i := range ids {
		ids[i] = fmt.Sprintf("wf-%d", i)
		for range 3 {
			call(ids[i])
		}
		before[ids[i]] = log.servedBy(t, ids[i])
		byNode[before[ids[i]]]++
	}
	if len(byNode) != 3 {
		t.Errorf("30 workflows went to %v, want all three nodes", byNode)
	}

	// ForWorkflow routes a call whose request names no workflow: Nodes is
	// answered by the node the workflow's other calls went to.
	for _, id := range ids[:5] {
		r, err := c.Nodes(client.ForWorkflow(ctx, id))
		if err != nil {
			t.Fatal(err)
		}
		if r.GetAnsweredBy() != before[id] {
			t.Errorf("Nodes for %s was answered by %s, want %s", id, r.GetAnsweredBy(), before[id])
		}
	}

	// A node stops: its workflows move, each to one other node, and the
	// others stay where they were.
	gone := before[ids[0]]
	nodes[gone].stop()
	// Once three calls in a row that name no workflow, round robin over
	// the nodes up, are answered by others, the client has seen it go.
	for streak := 0; streak < 3; {
		if who, err := answeredBy(ctx, c); err == nil && who != gone {
			streak++
		} else {
			streak = 0
		}
		if ctx.Err() != nil {
			t.Fatal("the client did not see the node stop")
		}
	}
	log.reset()
	for _, id := range ids {
		for range 3 {
			call(id)
		}
		now := log.servedBy(t, id)
		switch {
		case now == gone:
			t.Errorf("%s went to %s after it stopped", id, gone)
		case before[id] != gone && now != before[id]:
			t.Errorf("%s moved from %s to %s when %s stopped", id, before[id], now, gone)
		}
	}
}

// stallingProxy forwards TCP to a node until stall, then keeps every
// connection, old and new, open and passes nothing: a node that stops
// answering without closing its connections, as a paused machine or a
// network cut does.
type stallingProxy struct {
	addr    string
	stalled atomic.Bool
}

// startStallingProxy serves a proxy to target until the test ends, when it
// closes the listener and every connection it made, and waits for its
// goroutines.
func startStallingProxy(t *testing.T, target string) *stallingProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallingProxy{addr: l.Addr().String()}
	var (
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
		wg     sync.WaitGroup
	)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if !p.stalled.Load() {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
		}
	}
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			if closed { // accepted as the test ended
				mu.Unlock()
				c.Close()
				n.Close()
				return
			}
			conns = append(conns, c, n)
			mu.Unlock()
			wg.Go(func() { pipe(n, c) })
			wg.Go(func() { pipe(c, n) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// TestClientWithSeveralAddressesDropsANodeThatStopsAnswering: a node whose
// connection stays open but passes nothing is dropped after the client's
// keepalive ping goes unanswered, and its workflows' calls go to another
// node, instead of waiting until the operating system gives the connection
// up.
func TestClientWithSeveralAddressesDropsANodeThatStopsAnswering(t *testing.T) {
	t.Parallel()
	a, b := startNode(t, "node-a", "127.0.0.1"), startNode(t, "node-b", "127.0.0.1")
	p := startStallingProxy(t, a.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, p.addr+","+b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Until the client has a connection to both nodes, every call goes
	// to the one it has: wait until calls that name no workflow reach both.
	for seen := map[string]bool{}; len(seen) < 2; {
		who, err := answeredBy(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		seen[who] = true
	}
	// A workflow whose calls go to node-a.
	answer := func(id string) (string, error) {
		ctx, cancel := context.WithTimeout(client.ForWorkflow(ctx, id), time.Second)
		defer cancel()
		r, err := c.Nodes(ctx)
		return r.GetAnsweredBy(), err
	}
	var id string
	for i := 0; id == ""; i++ {
		if ctx.Err() != nil {
			t.Fatal("no workflow went to node-a")
		}
		if who, err := answer(fmt.Sprint("wf-", i)); err == nil && who == "node-a" {
			id = fmt.Sprint("wf-", i)
		}
	}

	p.stalled.Store(true)
	stalled := time.Now()
	for {
		who, err := answer(id)
		if err == nil && who == "node-b" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%s after node-a stopped answering, its workflow's calls still do not reach node-b: %v", time.Since(stalled).Round(time.Second), err)
		}
	}
	t.Logf("node-a dropped %s after it stopped answering", time.Since(stalled).Round(time.Second))
}
