package soak

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/internal/testdaemon"
)

// addressBook points every client of the run at the daemon's current
// address: durabled picks a new port at each start, and the clients, built
// once, follow it through a resolver of their own that the book updates.
type addressBook struct {
	mu        sync.Mutex
	addr      string
	resolvers []*manual.Resolver
}

// target is what clients dial; their resolver turns it into the address.
const target = "soak:///durabled"

func (b *addressBook) state() resolver.State {
	return resolver.State{Addresses: []resolver.Address{{Addr: b.addr}}}
}

// dialOptions returns the options of one new client connection.
func (b *addressBook) dialOptions() []grpc.DialOption {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := manual.NewBuilderWithScheme("soak")
	r.InitialState(b.state())
	b.resolvers = append(b.resolvers, r)
	return []grpc.DialOption{
		grpc.WithResolvers(r),
		// Reconnect quickly: the daemon is back within a second or two, and
		// gRPC's default backoff (up to 2 min) would leave workers idle.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: 5 * time.Second,
		}),
	}
}

// moved tells every client the daemon's new address.
func (b *addressBook) moved(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addr = addr
	for _, r := range b.resolvers {
		r.UpdateState(b.state())
	}
}

// dial returns a client that follows the daemon, with extra dial options.
func (b *addressBook) dial(t testing.TB, identity string, extra ...grpc.DialOption) *client.Client {
	t.Helper()
	c, err := client.New(target, client.WithIdentity(identity), client.WithDialOptions(append(b.dialOptions(), extra...)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// daemon is durabled under faults: killed, restarted, measured.
type daemon struct {
	t       testing.TB
	proc    *testdaemon.Process
	book    *addressBook
	logPath string

	runs     int             // processes started
	saved    int             // the last run whose logs are in logPath
	restarts []time.Duration // SIGKILL to serving, one per kill
	peakRSS  int64           // the largest high-water mark of any run, bytes
	rss      *rssSampler
}

// startDaemon runs durabled on dataDir, its logs kept in logPath.
func startDaemon(t testing.TB, dataDir, logPath string, args []string) *daemon {
	t.Helper()
	d := &daemon{t: t, logPath: logPath}
	d.proc = testdaemon.Exec(t, dataDir, args...)
	d.runs = 1
	d.book = &addressBook{addr: d.proc.Addr}
	if err := waitServing(d.proc.Addr, time.Minute); err != nil {
		t.Fatal(err)
	}
	d.rss = startRSSSampler(d.proc.Pid())
	// On every way out, the last run's logs join the file.
	t.Cleanup(func() {
		d.rss.stop()
		d.proc.Kill()
		d.saveLogs("killed as the test ended")
	})
	return d
}

// kill SIGKILLs durabled, starts it again on the same data directory and
// returns once it answers a health check.
func (d *daemon) kill(why string) {
	d.t.Helper()
	d.notePeak()
	d.rss.stop()
	t0 := time.Now()
	d.proc.Kill()
	d.saveLogs("SIGKILL: " + why)
	d.proc.Restart()
	d.runs++
	if err := waitServing(d.proc.Addr, time.Minute); err != nil {
		d.t.Fatalf("durabled run %d: %v", d.runs, err)
	}
	d.restarts = append(d.restarts, time.Since(t0))
	d.book.moved(d.proc.Addr)
	d.rss = startRSSSampler(d.proc.Pid())
}

// notePeak folds the running process's high-water mark into peakRSS.
func (d *daemon) notePeak() {
	if hwm, err := readHWM(d.proc.Pid()); err == nil {
		d.peakRSS = max(d.peakRSS, hwm)
	}
	d.peakRSS = max(d.peakRSS, d.rss.peak())
}

// saveLogs appends the current run's stderr to the log file, headed by how
// the run ended. Each run's logs are saved once.
func (d *daemon) saveLogs(end string) {
	if d.saved == d.runs {
		return
	}
	d.saved = d.runs
	f, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Errorf("keep durabled's logs: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "===== durabled run %d (%s) =====\n%s", d.runs, end, d.proc.Logs())
}

// waitServing returns once the daemon at addr answers a health check with
// SERVING, or an error after wait.
func waitServing(addr string, wait time.Duration) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	h := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for {
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true))
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("durabled at %s not serving within %s: %v %v", addr, wait, r.GetStatus(), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// logLines returns the lines of the kept logs that contain any of marks.
func logLines(path string, marks ...string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if slices.ContainsFunc(marks, func(m string) bool { return strings.Contains(line, m) }) {
			out = append(out, line)
		}
	}
	return out
}
