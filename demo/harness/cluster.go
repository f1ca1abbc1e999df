package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tinyllm/durable/demo/sink"
)

// Options say what a Cluster runs.
type Options struct {
	// Dir holds everything of the run: data/ (the daemon's), sink/, logs/.
	Dir string
	// Durabled is the daemon binary.
	Durabled string
	// DaemonArgs are extra durabled flags.
	DaemonArgs []string
	// PostgresDSN, when set, runs the daemon on that PostgreSQL database
	// (--store postgres) instead of a Badger directory under Dir.
	PostgresDSN string
	// Nodes is how many durabled nodes serve the database PostgresDSN
	// names, each under a --node name of its own (node-1, node-2, ...);
	// default 1, which runs durabled as it always ran, without --node. More
	// than one needs PostgresDSN and a durabled that runs several nodes on
	// one database (see SupportsNodes).
	Nodes int
	// Worker is the argv that runs a demo worker, without --addr,
	// --sink-addr, --identity and --log-reports, which the Cluster adds:
	// e.g. {exe, "worker"}. With several nodes a worker is given them all as
	// one address list and spreads its calls over the nodes that are up.
	Worker []string
	// StartTimeout bounds the wait for a daemon to say it is listening;
	// default 60 s.
	StartTimeout time.Duration
}

// Cluster is a daemon (or several nodes of one), its workers and the
// effects sink of one run.
type Cluster struct {
	opts     Options
	sink     *sink.Store
	sinkSrv  *sink.Server
	httpSrv  *http.Server
	sinkAddr string
	hook     atomic.Pointer[func(d sink.Delivery, pid int)]

	mu      sync.Mutex
	nodes   []*node
	workers map[int]*Proc
	nextID  int
	closed  bool
	acks    []Ack
}

// node is one durabled of the Cluster.
type node struct {
	name    string // its --node name; empty for a single daemon
	logPath string
	addr    string // fixed after its first start
	proc    *Proc  // nil while it is down
}

// Start opens the sink, serves it on a local port and starts the daemon on a
// fresh data dir in opts.Dir. Close the Cluster on every path out.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = time.Minute
	}
	for _, d := range []string{"data", "logs"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	st, err := sink.Open(filepath.Join(opts.Dir, "sink"))
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return nil, err
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.Nodes > 1 && opts.PostgresDSN == "" {
		st.Close()
		l.Close()
		return nil, errors.New("harness: several nodes share one PostgreSQL database: set PostgresDSN")
	}
	c := &Cluster{opts: opts, sink: st, sinkAddr: l.Addr().String(), workers: map[int]*Proc{}}
	for i := range opts.Nodes {
		n := &node{logPath: filepath.Join(opts.Dir, "logs", "durabled.log")}
		if opts.Nodes > 1 {
			n.name = fmt.Sprintf("node-%d", i+1)
			n.logPath = filepath.Join(opts.Dir, "logs", "durabled-"+n.name+".log")
		}
		c.nodes = append(c.nodes, n)
	}
	c.sinkSrv = &sink.Server{Store: st, AfterApplyFunc: func(d sink.Delivery, pid int) {
		if h := c.hook.Load(); h != nil {
			(*h)(d, pid)
		}
	}}
	c.httpSrv = &http.Server{Handler: c.sinkSrv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.httpSrv.Serve(l) }()
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Go(func() { errs[i] = c.StartNode(ctx, i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Addr is the daemon's address; with several nodes, every node's address
// separated by commas, the address list a client balances over.
func (c *Cluster) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr
	}
	return strings.Join(addrs, ",")
}

// Nodes is how many durabled nodes the Cluster runs.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// NodeAddr is the address of node i (from 0).
func (c *Cluster) NodeAddr(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].addr
}

// NodeName is node i's --node name ("node-1" for i = 0), or "durabled"
// for a single daemon.
func (c *Cluster) NodeName(i int) string {
	if c.nodes[i].name == "" {
		return "durabled"
	}
	return c.nodes[i].name
}

// NodePID is node i's process id, or 0 while it is down.
func (c *Cluster) NodePID(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.nodes[i].proc; p != nil {
		return p.PID()
	}
	return 0
}

// Sink is the effects sink the workers deliver to.
func (c *Cluster) Sink() *sink.Store { return c.sink }

// SinkAddr is the address workers reach the sink at.
func (c *Cluster) SinkAddr() string { return c.sinkAddr }

// SetAfterApply installs the sink's hook (see sink.Server.AfterApplyFunc),
// replacing the previous one; nil removes it.
func (c *Cluster) SetAfterApply(fn func(d sink.Delivery, pid int)) {
	if fn == nil {
		c.hook.Store(nil)
		return
	}
	c.hook.Store(&fn)
}

// listenRE finds a host:port in the daemon's "listening" log line, whether
// slog wrote it as text or JSON.
var listenRE = regexp.MustCompile(`(\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]|localhost):(\d+)`)

// StartDaemon starts durabled (node 0 of several) on the Cluster's data
// dir or database: the first time on a free port, later on the same
// address, and waits for its "listening" line.
func (c *Cluster) StartDaemon(ctx context.Context) error { return c.StartNode(ctx, 0) }

// DaemonPID is the running daemon's (node 0's) process id, or 0.
func (c *Cluster) DaemonPID() int { return c.NodePID(0) }

// KillDaemon SIGKILLs the daemon (node 0) and waits until it is gone.
func (c *Cluster) KillDaemon() { c.KillNode(0) }

// RestartDaemon SIGKILLs the daemon (node 0) and starts it again on the same
// data dir and address.
func (c *Cluster) RestartDaemon(ctx context.Context) error { return c.RestartNode(ctx, 0) }

// nameInUse is how a durabled node restarted right after it was killed is
// refused its own name: the database saw the killed one alive moments ago,
// and only time tells a dead node from a slow one.
// The name is quoted, and the quotes escaped in a log line that quotes the
// whole error.
var nameInUse = regexp.MustCompile(`node name \\?"[^"\\]*\\?" is in use`)

// StartNode starts node i: the first time on a free port, later on the same
// address, and waits for its "listening" line. A node started again under
// its name while the database still counts the killed one as alive is
// refused; StartNode starts it again until the name is free, within
// Options.StartTimeout.
func (c *Cluster) StartNode(ctx context.Context, i int) error {
	deadline := time.Now().Add(c.opts.StartTimeout)
	for {
		refused, err := c.startNode(ctx, i, deadline)
		if !refused || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startNode makes one attempt at StartNode; refused says the node exited
// because its name was still in use.
func (c *Cluster) startNode(ctx context.Context, i int, deadline time.Time) (refused bool, err error) {
	c.mu.Lock()
	n := c.nodes[i]
	if c.closed {
		c.mu.Unlock()
		return false, errors.New("harness: cluster closed")
	}
	if n.proc != nil {
		c.mu.Unlock()
		return false, fmt.Errorf("harness: %s already running", c.NodeName(i))
	}
	listen := n.addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	// Workers die here on purpose; a workflow task held by a killed worker
	// should come back in 2 s, not the default 10.
	argv := []string{c.opts.Durabled, "--listen", listen, "--workflow-task-timeout", "2s"}
	if c.opts.PostgresDSN != "" {
		argv = append(argv, "--store", "postgres", "--postgres-dsn", c.opts.PostgresDSN)
	} else {
		argv = append(argv, "--data", filepath.Join(c.opts.Dir, "data"))
	}
	if n.name != "" {
		argv = append(argv, "--node", n.name)
	}
	argv = append(argv, c.opts.DaemonArgs...)
	p, err := startProc(c.NodeName(i), n.logPath, argv)
	if err != nil {
		c.mu.Unlock()
		return false, err
	}
	n.proc = p
	c.mu.Unlock()

	found := make(chan string, 1)
	p.watchLines(func(line string) {
		if !strings.Contains(strings.ToLower(line), "listening") {
			return
		}
		if m := listenRE.FindStringSubmatch(line); m != nil {
			select {
			case found <- m[0]:
			default:
			}
		}
	})
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case addr := <-found:
		if port, _ := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:]); port == 0 {
			return false, fmt.Errorf("harness: %s says it listens on %s", p.Name, addr)
		}
		c.mu.Lock()
		n.addr = addr
		c.mu.Unlock()
		return false, nil
	case <-p.Done():
		c.mu.Lock()
		if n.proc == p {
			n.proc = nil
		}
		c.mu.Unlock()
		tail := p.Tail(20)
		return nameInUse.MatchString(tail), fmt.Errorf("harness: %s exited before listening (%v):\n%s", p.Name, p.err, tail)
	case <-timer.C:
	case <-ctx.Done():
	}
	c.KillNode(i)
	return false, fmt.Errorf("harness: %s did not say it was listening within %s:\n%s", p.Name, c.opts.StartTimeout, p.Tail(20))
}

// KillNode SIGKILLs node i and waits until it is gone.
func (c *Cluster) KillNode(i int) {
	c.mu.Lock()
	p := c.nodes[i].proc
	c.nodes[i].proc = nil
	c.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// RestartNode SIGKILLs node i and starts it again on the same address (and
// data dir, for a single daemon on Badger).
func (c *Cluster) RestartNode(ctx context.Context, i int) error {
	c.KillNode(i)
	return c.StartNode(ctx, i)
}

// StartWorker starts a demo worker connected to the daemon and the sink;
// args are extra worker flags (--outage, --task-queue Q).
func (c *Cluster) StartWorker(args ...string) (*Proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("harness: cluster closed")
	}
	c.nextID++
	name := fmt.Sprintf("worker-%d", c.nextID)
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr
	}
	argv := append(append([]string{}, c.opts.Worker...),
		"--addr", strings.Join(addrs, ","), "--sink-addr", c.sinkAddr, "--identity", name, "--log-reports")
	argv = append(argv, args...)
	p, err := startProc(name, filepath.Join(c.opts.Dir, "logs", name+".log"), argv, func(line string) {
		if a, ok := parseAck(line, name); ok {
			c.mu.Lock()
			c.acks = append(c.acks, a)
			c.mu.Unlock()
		}
	})
	if err != nil {
		return nil, err
	}
	c.workers[p.PID()] = p
	go func() {
		<-p.Done()
		c.mu.Lock()
		delete(c.workers, p.PID())
		c.mu.Unlock()
	}()
	return p, nil
}

// Worker returns the running worker with process id pid, or nil.
func (c *Cluster) Worker(pid int) *Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workers[pid]
}

// Workers returns the running workers.
func (c *Cluster) Workers() []*Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Proc, 0, len(c.workers))
	for _, p := range c.workers {
		out = append(out, p)
	}
	return out
}

// Close kills every child, stops serving the sink and closes it. It is safe
// to call more than once and from a signal handler's path.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	procs := make([]*Proc, 0, len(c.workers)+1)
	for _, p := range c.workers {
		procs = append(procs, p)
	}
	for _, n := range c.nodes {
		if n.proc != nil {
			procs = append(procs, n.proc)
			n.proc = nil
		}
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(p.Kill)
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.httpSrv.Shutdown(ctx)
	return c.sink.Close()
}
