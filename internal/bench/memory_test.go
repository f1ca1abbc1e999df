package bench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The load of BenchmarkMemoryLargePayloads; pass others after -args.
var (
	memWorkflows  = flag.Int("mem.workflows", 100, "workflows the memory load starts")
	memActivities = flag.Int("mem.activities", 50, "activities each workflow of the memory load schedules")
	memInput      = flag.Int("mem.input", 64<<10, "bytes of random input of each activity of the memory load")
	memSettle     = flag.Duration("mem.settle", time.Minute, "how long after the memory load ends its settled RSS is read")
	memArgs       = flag.String("mem.daemon-args", "", "extra durabled flags for the memory load, separated by spaces")
)

// BenchmarkMemoryLargePayloads measures what durabled's memory does with a
// load of large payloads: by default 100 workflows of 50 activities, each
// scheduled with 64 KiB of random input (about 330 MB of payloads), through
// the real durabled binary (on disk, fsync on) and a worker process. It
// samples the daemon's /proc status every 100 ms during the load and for
// -mem.settle after it, then stops the daemon and counts the live data (the
// bytes of every key and value the store holds). It reports
//
//   - peak-MB: the daemon's peak resident set (VmHWM) during the load, and
//     peak-anon-MB, the peak of its anonymous part (Go heap, Badger's
//     caches and memtables) without the pages of mapped files;
//   - settled-MB and settled-anon-MB: the same, -mem.settle after the load;
//   - live-MB: the live data, and peak/live, the ratio of the peak to it;
//   - dir-MB: the data directory's size on disk when the load ended (the
//     log prints its parts: LSM tables, value log, write-ahead log);
//   - activities/s and daemon-cpu-µs/activity over the load.
//
// The log shows the resident set every few seconds. Each run is one b.N; with
// more runs the figures are medians. -benchtime 3x runs the load four times
// (the testing package runs b.N = 1 first), so prefer -count for repeats:
// each run then reports its own line.
//
//	go test -run '^$' -bench MemoryLargePayloads -benchtime 1x -count 3 ./internal/bench
//	go test -run '^$' -bench MemoryLargePayloads -benchtime 1x ./internal/bench -args -mem.daemon-args='--memory-budget 256MiB' -mem.settle=30s
func BenchmarkMemoryLargePayloads(b *testing.B) {
	var runs []memoryRun
	for range b.N {
		runs = append(runs, runMemoryLoad(b))
	}
	median := func(f func(memoryRun) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(median(func(r memoryRun) float64 { return mb(r.peak.hwm) }), "peak-MB")
	b.ReportMetric(median(func(r memoryRun) float64 { return mb(r.peakAnon) }), "peak-anon-MB")
	b.ReportMetric(median(func(r memoryRun) float64 { return mb(r.settled.rss) }), "settled-MB")
	b.ReportMetric(median(func(r memoryRun) float64 { return mb(r.settled.anon) }), "settled-anon-MB")
	b.ReportMetric(median(func(r memoryRun) float64 { return mb(r.live) }), "live-MB")
	b.ReportMetric(median(func(r memoryRun) float64 { return float64(r.peak.hwm) / float64(r.live) }), "peak/live")
	b.ReportMetric(median(func(r memoryRun) float64 { return mb(r.dir.total()) }), "dir-MB")
	b.ReportMetric(median(func(r memoryRun) float64 { return float64(r.activities) / r.elapsed.Seconds() }), "activities/s")
	b.ReportMetric(median(func(r memoryRun) float64 {
		return float64(r.cpu.Microseconds()) / float64(r.activities)
	}), "daemon-cpu-µs/activity")
}

// memoryRun is what one run of the memory load measured.
type memoryRun struct {
	activities int
	elapsed    time.Duration // from the first start to the last workflow closed
	cpu        time.Duration // the daemon's CPU time over the load
	peak       procStatus    // at the end of the load: hwm is the peak so far
	peakAnon   int64         // the highest RssAnon sampled during the load
	settled    procStatus    // -mem.settle after the load
	dir        dirSize       // when the load ended
	settledDir dirSize       // -mem.settle after the load
	live       int64         // bytes of the keys and values the store holds
}

func runMemoryLoad(b *testing.B) memoryRun {
	b.StopTimer()
	dir := b.TempDir()
	d := testdaemon.Exec(b, dir, strings.Fields(*memArgs)...)
	defer d.Kill()
	pid := d.Pid()
	samples := sampleStatus(pid, 100*time.Millisecond)
	defer samples.stop()

	worker := exec.Command(os.Args[0], "-test.run=^$")
	worker.Env = append(os.Environ(), envWorker+"="+d.Addr, envInput+"="+strconv.Itoa(*memInput))
	worker.Stderr = os.Stderr
	if err := worker.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		worker.Process.Kill()
		worker.Wait()
	}()
	c, err := client.New(d.Addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	svc, ctx := c.Service(), context.Background()

	run := memoryRun{activities: *memWorkflows * *memActivities}
	b.StartTimer()
	start, cpuStart := time.Now(), procCPU(pid)
	var ids []string
	for i := range *memWorkflows {
		id := fmt.Sprintf("mem-%d", i)
		ids = append(ids, id)
		if _, err := svc.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "FanOut", TaskQueue: taskQueue, Input: []byte(strconv.Itoa(*memActivities))}); err != nil {
			b.Fatal(err)
		}
	}
	for _, id := range ids {
		for {
			desc, err := svc.DescribeWorkflow(ctx, &durablev1.DescribeWorkflowRequest{WorkflowId: id, WaitForClose: true})
			if err != nil {
				b.Fatal(err)
			}
			if st := desc.GetWorkflow().GetStatus(); st == durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED {
				break
			} else if st != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
				b.Fatalf("workflow %s ended %v", id, st)
			}
		}
	}
	run.elapsed, run.cpu = time.Since(start), procCPU(pid)-cpuStart
	b.StopTimer()
	loadEnd := time.Now()
	run.peak, err = readStatus(pid)
	if err != nil {
		b.Fatal(err)
	}
	run.peakAnon = samples.peakAnon()
	run.dir = measureDir(dir)

	// The worker stays connected and idle, as workers do between loads.
	time.Sleep(time.Until(loadEnd.Add(*memSettle)))
	if run.settled, err = readStatus(pid); err != nil {
		b.Fatal(err)
	}
	run.settledDir = measureDir(dir)
	samples.stop()
	worker.Process.Kill()

	if err := d.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	if code := d.Wait(); code != 0 {
		b.Fatalf("durabled exited %d:\n%s", code, d.Logs())
	}
	if run.live, err = liveData(dir); err != nil {
		b.Fatal(err)
	}

	b.Logf("load: %d workflows × %d activities × %d B input in %s (%.0f activities/s), daemon CPU %s; daemon flags %q",
		*memWorkflows, *memActivities, *memInput, run.elapsed.Round(time.Millisecond),
		float64(run.activities)/run.elapsed.Seconds(), run.cpu.Round(time.Millisecond), *memArgs)
	b.Logf("peak %.1f MB (VmHWM; anonymous part peaked at %.1f MB); settled %.1f MB (%.1f anonymous) %s after the load",
		mb(run.peak.hwm), mb(run.peakAnon), mb(run.settled.rss), mb(run.settled.anon), *memSettle)
	b.Logf("live data %.1f MB; peak/live %.2f", mb(run.live), float64(run.peak.hwm)/float64(run.live))
	b.Logf("data directory at load end: %s", run.dir)
	b.Logf("data directory after settling: %s", run.settledDir)
	var timeline strings.Builder
	step := max(time.Second, run.elapsed/30).Round(time.Second)
	for _, s := range append(samples.every(step, start, loadEnd), samples.every(10*time.Second, loadEnd, loadEnd.Add(*memSettle+time.Second))...) {
		fmt.Fprintf(&timeline, "\n  %7s  %7.1f = %7.1f + %7.1f", s.at.Sub(start).Round(time.Second), mb(s.rss), mb(s.anon), mb(s.file))
	}
	b.Logf("resident set in MB (all = anonymous + mapped files) from the load's start (-v shows every line), every %s during the load, then every 10s:%s", step, timeline.String())
	return run
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// procStatus is the memory of a process as /proc/PID/status tells it, in
// bytes.
type procStatus struct {
	at   time.Time
	rss  int64 // VmRSS: everything resident
	hwm  int64 // VmHWM: the peak of VmRSS so far
	anon int64 // RssAnon: heap, stacks, anonymous mappings
	file int64 // RssFile: pages of mapped files (Badger maps its files)
}

func readStatus(pid int) (procStatus, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procStatus{}, err
	}
	defer f.Close()
	s := procStatus{at: time.Now()}
	fields := map[string]*int64{"VmRSS:": &s.rss, "VmHWM:": &s.hwm, "RssAnon:": &s.anon, "RssFile:": &s.file}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if p, ok := fields[parts[0]]; ok && len(parts) == 3 && parts[2] == "kB" {
			kb, _ := strconv.ParseInt(parts[1], 10, 64)
			*p = kb << 10
		}
	}
	return s, sc.Err()
}

// sampler reads a process's status at an interval until stopped.
type sampler struct {
	mu       sync.Mutex
	samples  []procStatus
	done     chan struct{}
	stopOnce sync.Once
	stopped  chan struct{}
}

func sampleStatus(pid int, every time.Duration) *sampler {
	s := &sampler{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(s.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if st, err := readStatus(pid); err == nil {
				s.mu.Lock()
				s.samples = append(s.samples, st)
				s.mu.Unlock()
			}
			select {
			case <-t.C:
			case <-s.done:
				return
			}
		}
	}()
	return s
}

func (s *sampler) stop() {
	s.stopOnce.Do(func() { close(s.done) })
	<-s.stopped
}

func (s *sampler) peakAnon() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p int64
	for _, st := range s.samples {
		p = max(p, st.anon)
	}
	return p
}

// every returns, of the samples taken in [from, to), the first at or after
// each multiple of step from from.
func (s *sampler) every(step time.Duration, from, to time.Time) []procStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []procStatus
	next := from
	for _, st := range s.samples {
		if !st.at.Before(next) && st.at.Before(to) {
			out = append(out, st)
			for !st.at.Before(next) {
				next = next.Add(step)
			}
		}
	}
	return out
}

// dirSize is the space a Badger directory takes on disk (allocated blocks,
// so that preallocated, sparse files count for what they hold), by part.
type dirSize struct {
	sst, vlog, wal, other int64
}

func (d dirSize) total() int64 { return d.sst + d.vlog + d.wal + d.other }

func (d dirSize) String() string {
	return fmt.Sprintf("%.1f MB (LSM tables %.1f, value log %.1f, write-ahead log %.1f, other %.1f)",
		mb(d.total()), mb(d.sst), mb(d.vlog), mb(d.wal), mb(d.other))
}

func measureDir(dir string) dirSize {
	var d dirSize
	filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Stat(path, &st) != nil {
			return nil
		}
		n := st.Blocks * 512
		switch filepath.Ext(path) {
		case ".sst":
			d.sst += n
		case ".vlog":
			d.vlog += n
		case ".mem":
			d.wal += n
		default:
			d.other += n
		}
		return nil
	})
	return d
}

// liveData opens the store of a stopped daemon and adds up the bytes of the
// latest version of every key and its value.
func liveData(dir string) (int64, error) {
	db, err := badgerdb.Open(badgerdb.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	err = db.View(func(txn *badgerdb.Txn) error {
		it := txn.NewIterator(badgerdb.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			n += int64(len(item.Key()))
			if err := item.Value(func(v []byte) error { n += int64(len(v)); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}
