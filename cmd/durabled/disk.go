package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/server"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// diskAdvice ends every refusal for want of space: what the operator can do.
const diskAdvice = "free space on that volume, or restart durabled with a lower --disk-reserve " +
	"(at your own risk: below what the store may still write once writes stop, a full disk can crash it)"

// diskWatch ties the monitor of free space on the data volume to the
// engine's write gate, the metrics and the log: below the reserve the gate
// closes (with the figures of the latest reading), above it plus the
// margin it opens; the change is logged once, at ERROR going in and INFO
// coming out.
type diskWatch struct {
	mon     *badgerstore.Monitor
	logger  *slog.Logger
	metrics *server.Metrics // nil without --metrics-listen
	// readOnly, when set, says the store was opened read-only at start:
	// every change of state is refused with it until a restart.
	readOnly error

	mu  sync.Mutex
	eng *engine.Engine // nil until attach
}

func newDiskWatch(dir string, reserve badgerstore.Reserve, metrics *server.Metrics, logger *slog.Logger) *diskWatch {
	d := &diskWatch{logger: logger, metrics: metrics}
	d.mon = badgerstore.NewMonitor(badgerstore.MonitorParams{
		Dir: dir, Reserve: reserve, Advice: diskAdvice,
		CheckedFunc: d.checked, ChangedFunc: d.changed,
	})
	return d
}

// attach hands the engine to the watch; from then on its readings close and
// open the engine's write gate.
func (d *diskWatch) attach(e *engine.Engine) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.eng = e
}

func (d *diskWatch) engine() *engine.Engine {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.eng
}

// run reads the volume about once a second until ctx ends.
func (d *diskWatch) run(ctx context.Context) { d.mon.Run(ctx) }

// writeFailed is the engine's WriteFailedFunc: a write failed, so the disk
// is looked at again at once; when it is now short, the caller is refused
// for want of space.
func (d *diskWatch) writeFailed(error) { d.mon.Check() }

// checked hears every reading: the metrics follow it, and while space is
// short the refusal is renewed with the latest figures.
func (d *diskWatch) checked(s badgerstore.DiskStatus) {
	if d.metrics != nil && s.Err == nil {
		d.metrics.DiskChecked(s.Free, s.Reserve, s.Short)
	}
	if e := d.engine(); e != nil && s.Short && s.Err == nil {
		e.RefuseWrites(s.Refusal())
	}
}

// changed hears each change after the first reading.
func (d *diskWatch) changed(s badgerstore.DiskStatus) {
	figures := []any{"free", badgerstore.FormatSize(s.Free), "total", badgerstore.FormatSize(s.Total),
		"reserve", badgerstore.FormatSize(s.Reserve), "data", s.Dir}
	switch {
	case s.Err != nil:
		d.logger.Warn("cannot read the free space of the data volume; the disk state stays as it was", "data", s.Dir, "err", s.Err)
		return
	case s.Short:
		d.logger.Error("disk almost full: refusing changes of state until space is back (reads, Watch and polls go on)",
			append(figures, "what_to_do", diskAdvice)...)
		return
	case d.readOnly != nil:
		d.logger.Info("disk space is back above the reserve, but the store was opened read-only at start: restart durabled to take writes again", figures...)
		return
	}
	d.logger.Info("disk space is back above the reserve: changes of state resume", figures...)
	if e := d.engine(); e != nil {
		e.AllowWrites()
	}
}

// readOnlyRefusal is what every change of state is refused with when the
// store was opened read-only at start.
func readOnlyRefusal(s badgerstore.DiskStatus) error {
	return fmt.Errorf("%w at start: %s free of %s on the volume of %s, below the disk reserve of %s, so the store was opened read-only: "+
		"changes of state are refused until durabled restarts (reads, Watch and polls go on); free space on that volume, then restart durabled",
		engine.ErrNoSpace, badgerstore.FormatSize(s.Free), badgerstore.FormatSize(s.Total), s.Dir, badgerstore.FormatSize(s.Reserve))
}

// writesHealth returns the engine's WritesChangedFunc: the health of
// server.WritesHealthService follows the write gate. A report that does not
// change the status sets nothing.
func writesHealth(hs *health.Server) func(error) {
	var mu sync.Mutex
	last := healthpb.HealthCheckResponse_SERVICE_UNKNOWN
	return func(refused error) {
		st := healthpb.HealthCheckResponse_SERVING
		if refused != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		mu.Lock()
		defer mu.Unlock()
		if st != last {
			hs.SetServingStatus(server.WritesHealthService, st)
			last = st
		}
	}
}
