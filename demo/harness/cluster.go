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
	// Worker is the argv that runs a demo worker, without --addr and
	// --sink-addr, which the Cluster adds: e.g. {exe, "worker"}.
	Worker []string
	// StartTimeout bounds the wait for a daemon to say it is listening;
	// default 60 s.
	StartTimeout time.Duration
}

// Cluster is a daemon, its workers and the effects sink of one run.
type Cluster struct {
	opts     Options
	sink     *sink.Store
	sinkSrv  *sink.Server
	httpSrv  *http.Server
	sinkAddr string
	hook     atomic.Pointer[func(d sink.Delivery, pid int)]

	mu      sync.Mutex
	addr    string // the daemon's, fixed after its first start
	daemon  *Proc
	workers map[int]*Proc
	nextID  int
	closed  bool
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
	c := &Cluster{opts: opts, sink: st, sinkAddr: l.Addr().String(), workers: map[int]*Proc{}}
	c.sinkSrv = &sink.Server{Store: st, AfterApplyFunc: func(d sink.Delivery, pid int) {
		if h := c.hook.Load(); h != nil {
			(*h)(d, pid)
		}
	}}
	c.httpSrv = &http.Server{Handler: c.sinkSrv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.httpSrv.Serve(l) }()
	if err := c.StartDaemon(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Addr is the daemon's address.
func (c *Cluster) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
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

// StartDaemon starts durabled on the Cluster's data dir: the first time on a
// free port, later on the same address, and waits for its "listening" line.
func (c *Cluster) StartDaemon(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.New("harness: cluster closed")
	}
	if c.daemon != nil {
		c.mu.Unlock()
		return errors.New("harness: daemon already running")
	}
	listen := c.addr
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
	argv = append(argv, c.opts.DaemonArgs...)
	p, err := startProc("durabled", filepath.Join(c.opts.Dir, "logs", "durabled.log"), argv)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	c.daemon = p
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
	timer := time.NewTimer(c.opts.StartTimeout)
	defer timer.Stop()
	select {
	case addr := <-found:
		if port, _ := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:]); port == 0 {
			return fmt.Errorf("harness: durabled says it listens on %s", addr)
		}
		c.mu.Lock()
		c.addr = addr
		c.mu.Unlock()
		return nil
	case <-p.Done():
		c.mu.Lock()
		c.daemon = nil
		c.mu.Unlock()
		return fmt.Errorf("harness: durabled exited before listening (%v):\n%s", p.err, p.Tail(20))
	case <-timer.C:
	case <-ctx.Done():
	}
	c.KillDaemon()
	return fmt.Errorf("harness: durabled did not say it was listening within %s:\n%s", c.opts.StartTimeout, p.Tail(20))
}

// DaemonPID is the running daemon's process id, or 0.
func (c *Cluster) DaemonPID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.daemon == nil {
		return 0
	}
	return c.daemon.PID()
}

// KillDaemon SIGKILLs the daemon and waits until it is gone.
func (c *Cluster) KillDaemon() {
	c.mu.Lock()
	p := c.daemon
	c.daemon = nil
	c.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// RestartDaemon SIGKILLs the daemon and starts it again on the same data dir
// and address.
func (c *Cluster) RestartDaemon(ctx context.Context) error {
	c.KillDaemon()
	return c.StartDaemon(ctx)
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
	argv := append(append([]string{}, c.opts.Worker...),
		"--addr", c.addr, "--sink-addr", c.sinkAddr, "--identity", name)
	argv = append(argv, args...)
	p, err := startProc(name, filepath.Join(c.opts.Dir, "logs", name+".log"), argv)
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
	if c.daemon != nil {
		procs = append(procs, c.daemon)
		c.daemon = nil
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
