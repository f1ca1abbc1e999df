//go:build linux

package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// smallVolume is a tmpfs mounted for one test; its size can be changed
// while it is in use.
type smallVolume struct {
	t   *testing.T
	dir string
}

// mountSmallVolume mounts a tmpfs of size bytes on a fresh directory and
// unmounts it when the test ends. It skips the test unless it runs as root.
func mountSmallVolume(t *testing.T, size uint64) *smallVolume {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs for the data directory (CI runs the tests as root)")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatUint(size, 10)); err != nil {
		t.Skipf("cannot mount a tmpfs here, even as root: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return &smallVolume{t: t, dir: dir}
}

func (v *smallVolume) space() badgerstore.Space {
	v.t.Helper()
	s, err := badgerstore.SpaceOf(v.dir)
	if err != nil {
		v.t.Fatal(err)
	}
	return s
}

// resize makes the volume size bytes large.
func (v *smallVolume) resize(size uint64) {
	v.t.Helper()
	if err := syscall.Mount("tmpfs", v.dir, "tmpfs", syscall.MS_REMOUNT, "size="+strconv.FormatUint(size, 10)); err != nil {
		v.t.Fatalf("resize the tmpfs to %d bytes: %v", size, err)
	}
}

// fill writes a file of n bytes on the volume and returns its path.
func (v *smallVolume) fill(name string, n uint64) string {
	v.t.Helper()
	path := filepath.Join(v.dir, name)
	f, err := os.Create(path)
	if err != nil {
		v.t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, uint64(len(chunk)))
		if _, err := f.Write(chunk[:k]); err != nil {
			v.t.Fatalf("fill %s: %v", path, err)
		}
		n -= k
	}
	return path
}

// logField reads key=value from the last log line that holds msg.
func logField(t *testing.T, logs, msg, key string) string {
	t.Helper()
	lines := strings.Split(logs, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if !strings.Contains(lines[i], msg) {
			continue
		}
		for _, f := range strings.Fields(lines[i]) {
			if v, ok := strings.CutPrefix(f, key+"="); ok {
				return v
			}
		}
	}
	t.Fatalf("no %s= in a %q log line:\n%s", key, msg, logs)
	return ""
}

// waitUntil calls cond every 50 ms until it is true or 20 s have passed.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// watchSnapshot opens a Watch and reads its snapshot to the end.
func watchSnapshot(t *testing.T, c durablev1.DurableClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := c.Watch(ctx, &durablev1.WatchRequest{})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	for {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
			return
		}
	}
}

// TestDiskFullRefusesWritesAndRecovers runs durabled on a tmpfs a little
// larger than its disk reserve. Writes are accepted until free space falls
// below the reserve, then refused with ResourceExhausted while reads, Watch
// and polls go on and the process lives; freeing space resumes writes by
// themselves; every acknowledged write is there after a restart, and no
// refused one is. Started again with the volume below its reserve, durabled
// opens read-only, says so once, serves reads, refuses writes until it is
// restarted with space, and never crashes.
func TestDiskFullRefusesWritesAndRecovers(t *testing.T) {
	t.Parallel()
	vol := mountSmallVolume(t, 1<<30)
	dataDir := filepath.Join(vol.dir, "data")
	d := testdaemon.Exec(t, dataDir, "--metrics-listen", "127.0.0.1:0")
	reserve, err := strconv.ParseUint(logField(t, d.Logs(), "msg=listening", "disk_reserve"), 10, 64)
	if err != nil || reserve == 0 {
		t.Fatalf("disk_reserve in the listening line: %v", err)
	}
	margin := badgerstore.ResumeMargin(reserve)

	// Shrink the volume to what the daemon uses, plus the reserve, plus
	// room for a filler (more than the margin, so that deleting it lets
	// writes resume) and 8 MiB of writes.
	const room = 8 << 20
	filler := margin + 16<<20
	sp := vol.space()
	vol.resize(sp.Total - sp.Free + reserve + filler + room)
	fillerPath := vol.fill("filler", filler)
	// The daemon reads the volume about once a second: wait until it has
	// seen the smaller one.
	waitUntil(t, "the daemon to read the resized volume", func() bool {
		return value(t, scrape(t, d.MetricsAddr), "durable_disk_free_bytes") < float64(reserve+room+1<<20)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := durablev1.NewDurableClient(dial(t, d.Addr))
	payload := make([]byte, 64<<10)
	rand.Read(payload)
	var acked, refused []string
	start := func(id string) error {
		_, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "Fill", TaskQueue: "q", Input: payload})
		switch status.Code(err) {
		case codes.OK:
			acked = append(acked, id)
		case codes.ResourceExhausted:
			refused = append(refused, id)
		default:
			t.Fatalf("start %s: %v", id, err)
		}
		return err
	}

	// Write until refused.
	var refusal error
	for i := 0; refusal == nil; i++ {
		if i > 4*room/len(payload) {
			t.Fatalf("%d writes of %d bytes and none refused; free space now %d, reserve %d", i, len(payload), vol.space().Free, reserve)
		}
		if err := start(fmt.Sprintf("fill-%d", i)); err != nil {
			refusal = err
		}
	}
	t.Logf("%d writes of %d bytes acknowledged, then refused with %s free (reserve %s)",
		len(acked), len(payload), badgerstore.FormatSize(vol.space().Free), badgerstore.FormatSize(reserve))
	msg := status.Convert(refusal).Message()
	for _, want := range []string{"free of", dataDir, "disk reserve of " + badgerstore.FormatSize(reserve), "--disk-reserve"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal %q does not say %q", msg, want)
		}
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged before the refusal")
	}

	// Reads, Watch and polls go on; the writes health says NOT_SERVING.
	if _, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: acked[0]}); err != nil {
		t.Errorf("describe while the disk is full: %v", err)
	}
	if _, err := c.ListWorkflows(ctx, &durablev1.ListWorkflowsRequest{}); err != nil {
		t.Errorf("list while the disk is full: %v", err)
	}
	watchSnapshot(t, c)
	pollCtx, stopPoll := context.WithTimeout(ctx, time.Second)
	poll, err := c.PollWorkflowTask(pollCtx, &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	stopPoll()
	if len(poll.GetTaskToken()) != 0 || (err != nil && status.Code(err) != codes.DeadlineExceeded) {
		t.Errorf("poll while the disk is full: %v, %v; want no task", poll, err)
	}
	if got := healthOf(t, d, server.WritesHealthService); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("writes health while the disk is full: %v", got)
	}
	if got := healthOf(t, d, ""); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("overall health while the disk is full: %v", got)
	}
	fams := scrape(t, d.MetricsAddr)
	if value(t, fams, "durable_disk_full") != 1 || value(t, fams, "durable_writes_refused") != 1 {
		t.Error("the durable_disk_full and durable_writes_refused alarms are not raised")
	}
	if n := strings.Count(d.Logs(), "level=ERROR"); n != 1 || !strings.Contains(d.Logs(), "disk almost full") {
		t.Errorf("want one ERROR line saying the disk is almost full:\n%s", d.Logs())
	}

	// Free space: writes resume by themselves.
	if err := os.Remove(fillerPath); err != nil {
		t.Fatal(err)
	}
	i := 0
	waitUntil(t, "writes to resume once the filler is gone", func() bool {
		i++
		return start(fmt.Sprintf("resumed-%d", i)) == nil
	})
	for j := range 5 {
		if err := start(fmt.Sprintf("after-%d", j)); err != nil {
			t.Fatalf("write after space came back: %v", err)
		}
	}
	if got := healthOf(t, d, server.WritesHealthService); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("writes health once space is back: %v", got)
	}
	if !strings.Contains(d.Logs(), "disk space is back above the reserve") {
		t.Errorf("no INFO line saying space is back:\n%s", d.Logs())
	}

	// A clean stop on the nearly full volume (Badger flushes its memtable),
	// then every acknowledged write is there and no refused one.
	stop := func() {
		t.Helper()
		if err := d.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := d.Wait(); code != 0 {
			t.Fatalf("exit code %d, want 0; logs:\n%s", code, d.Logs())
		}
	}
	stop()
	d.Restart()
	c = durablev1.NewDurableClient(dial(t, d.Addr))
	checkWrites := func() {
		t.Helper()
		for _, id := range acked {
			if _, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: id}); err != nil {
				t.Fatalf("acknowledged %s after a restart: %v", id, err)
			}
		}
		for _, id := range refused {
			if _, err := c.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: id}); status.Code(err) != codes.NotFound {
				t.Fatalf("refused %s after a restart: %v, want NotFound", id, err)
			}
		}
	}
	checkWrites()

	// Start on a full disk: killed, the volume filled below the reserve,
	// then started again.
	d.Kill()
	sp = vol.space()
	fillerPath = vol.fill("filler-2", sp.Free-reserve+4<<20)
	d.Restart()
	logs := d.Logs()
	if logField(t, logs, "msg=listening", "read_only") != "true" {
		t.Fatalf("started below the reserve, but not read-only:\n%s", logs)
	}
	if strings.Count(logs, "level=ERROR") != 1 || !strings.Contains(logs, "disk full at start: the store is open read-only") ||
		!strings.Contains(logs, "restart durabled") || !strings.Contains(logs, "reserve=") {
		t.Errorf("want one ERROR line saying the store is read-only, with the figures and what to do:\n%s", logs)
	}
	c = durablev1.NewDurableClient(dial(t, d.Addr))
	checkWrites()
	watchSnapshot(t, c)
	_, err = c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "read-only", WorkflowType: "Fill", TaskQueue: "q"})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "read-only") || !strings.Contains(st.Message(), "restart durabled") {
		t.Errorf("start on a read-only store: %v, want ResourceExhausted saying to restart", err)
	}
	if got := healthOf(t, d, server.WritesHealthService); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("writes health of a read-only store: %v", got)
	}

	// Space back: the log says a restart is needed, and writes stay refused
	// until then.
	if err := os.Remove(fillerPath); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the log to say a restart is needed", func() bool {
		return strings.Contains(d.Logs(), "opened read-only at start: restart durabled to take writes again")
	})
	_, err = c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: "read-only", WorkflowType: "Fill", TaskQueue: "q"})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("start on a read-only store with space back: %v, want ResourceExhausted until a restart", err)
	}
	stop()
	d.Restart()
	if logField(t, d.Logs(), "msg=listening", "read_only") != "false" {
		t.Fatalf("restarted with space, but read-only:\n%s", d.Logs())
	}
	c = durablev1.NewDurableClient(dial(t, d.Addr))
	if err := start("after-read-only"); err != nil {
		t.Fatalf("write after the read-only start: %v", err)
	}
	checkWrites()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the test ran out of time")
	}
}
