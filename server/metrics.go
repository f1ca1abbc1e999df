package server

import (
	"context"
	"strings"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Metrics are durabled's Prometheus metrics. Create them with NewMetrics,
// give them to the engine as Options.Observer and to the server as
// Options.Metrics, and serve Registry with promhttp. Every name starts with
// durable_; no label ever holds a workflow or activity id, and the label
// values that come from users (activity types and task queue names) are
// capped at MaxLabelValues each, the rest counted as "_other".
type Metrics struct {
	// Registry holds these metrics and the Go runtime and process
	// collectors.
	Registry *prometheus.Registry

	rpc             *grpcprom.ServerMetrics
	attempts        *prometheus.CounterVec
	timeouts        *prometheus.CounterVec
	deadLettered    *prometheus.CounterVec
	redrives        *prometheus.CounterVec
	scheduleToStart *prometheus.HistogramVec
	retryLateness   prometheus.Histogram
	attemptDuration *prometheus.HistogramVec
	batchSize       prometheus.Histogram
	commitDuration  prometheus.Histogram
	fsyncDuration   prometheus.Histogram
	diskFree        prometheus.Gauge
	diskReserve     prometheus.Gauge
	diskFull        prometheus.Gauge

	types  *labelCap
	queues *labelCap
	engine *engine.Engine  // for the gauges; set by New
	self   engine.NodeSelf // this daemon, for the node gauges; set by New
	mu     sync.Mutex
}

// MaxLabelValues bounds the distinct activity types, and separately the
// distinct task queues, that get a label value of their own.
const MaxLabelValues = 500

// otherLabel stands for the label values over MaxLabelValues.
const otherLabel = "_other"

var _ engine.Observer = (*Metrics)(nil)

// latencyBuckets span 1 ms to about 2 h: attempts and waits in a queue.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 17)

// NewMetrics creates the metrics and their registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		rpc: grpcprom.NewServerMetrics(
			grpcprom.WithServerCounterOptions(grpcprom.WithNamespace("durable")),
			grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramNamespace("durable"),
				grpcprom.WithHistogramBuckets([]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30})),
		),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "durable_activity_attempts_total",
			Help: "Activity attempts that ended, by activity type and outcome: completed; failed (for good: non-retryable), retried or dead_lettered after a reported failure; timed_out (the lease ran out).",
		}, []string{"activity_type", "outcome"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "durable_activity_timeouts_total",
			Help: "Activity timeouts that ran out, by activity type and kind: start_to_close, heartbeat, schedule_to_start, schedule_to_close.",
		}, []string{"activity_type", "kind"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "durable_activity_dead_letters_total",
			Help: "Activities parked in the dead-letter queue, by activity type.",
		}, []string{"activity_type"}),
		redrives: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "durable_activity_redrives_total",
			Help: "Dead letters put back in their queue, by activity type.",
		}, []string{"activity_type"}),
		scheduleToStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "durable_activity_schedule_to_start_seconds",
			Help:    "How long attempts waited between becoming due and being leased to a worker, by activity type.",
			Buckets: latencyBuckets,
		}, []string{"activity_type"}),
		retryLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "durable_activity_retry_lateness_seconds",
			Help:    "How late retries (attempt 2 and later) were handed to a worker after their backoff ended.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 3, 14),
		}),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "durable_activity_attempt_duration_seconds",
			Help:    "How long attempts ran, from lease to result, failure or timeout, by activity type.",
			Buckets: latencyBuckets,
		}, []string{"activity_type"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "durable_commit_batch_transitions",
			Help:    "State transitions committed together in one store transaction (group commit).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		commitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "durable_commit_duration_seconds",
			Help:    "How long one store transaction took to commit (before its fsync).",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2.5, 14),
		}),
		fsyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "durable_fsync_duration_seconds",
			Help:    "How long one fsync of the store took; every acknowledged change waits for one.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2.5, 14),
		}),
		diskFree: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "durable_disk_free_bytes",
			Help: "Free bytes on the volume of the data directory, as last read (about once a second).",
		}),
		diskReserve: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "durable_disk_reserve_bytes",
			Help: "The disk reserve: below this many free bytes, changes of state are refused.",
		}),
		diskFull: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "durable_disk_full",
			Help: "1 while free space is below the disk reserve (writes refused, reads served), else 0: an alarm.",
		}),
		types:  newLabelCap(MaxLabelValues),
		queues: newLabelCap(MaxLabelValues),
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.rpc, m.attempts, m.timeouts, m.deadLettered, m.redrives, m.scheduleToStart, m.retryLateness,
		m.attemptDuration, m.batchSize, m.commitDuration, m.fsyncDuration,
		m.diskFree, m.diskReserve, m.diskFull,
		gaugeCollector{m},
	)
	return m
}

// interceptors are the RPC counters' gRPC interceptors.
func (m *Metrics) interceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	return m.rpc.UnaryServerInterceptor(), m.rpc.StreamServerInterceptor()
}

// attach makes the gauges read e, in the daemon self.
func (m *Metrics) attach(e *engine.Engine, self engine.NodeSelf) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.engine, m.self = e, self
}

// AttemptStarted records the schedule-to-start latency and, for retries,
// their lateness.
func (m *Metrics) AttemptStarted(activityType string, attempt int32, waited time.Duration) {
	m.scheduleToStart.WithLabelValues(m.types.get(activityType)).Observe(waited.Seconds())
	if attempt > 1 {
		m.retryLateness.Observe(waited.Seconds())
	}
}

// AttemptEnded counts the attempt by its outcome and records its duration.
func (m *Metrics) AttemptEnded(activityType string, result engine.AttemptResult, took time.Duration) {
	t := m.types.get(activityType)
	m.attempts.WithLabelValues(t, string(result)).Inc()
	m.attemptDuration.WithLabelValues(t).Observe(took.Seconds())
}

// TimedOut counts a timeout by kind.
func (m *Metrics) TimedOut(activityType, kind string) {
	m.timeouts.WithLabelValues(m.types.get(activityType), timeoutLabel(kind)).Inc()
}

// DeadLettered counts a dead letter.
func (m *Metrics) DeadLettered(activityType string) {
	m.deadLettered.WithLabelValues(m.types.get(activityType)).Inc()
}

// Redriven counts a redrive.
func (m *Metrics) Redriven(activityType string) {
	m.redrives.WithLabelValues(m.types.get(activityType)).Inc()
}

// BatchCommitted records a commit's size and duration.
func (m *Metrics) BatchCommitted(transitions int, took time.Duration) {
	m.batchSize.Observe(float64(transitions))
	m.commitDuration.Observe(took.Seconds())
}

// Synced records an fsync's duration.
func (m *Metrics) Synced(took time.Duration) { m.fsyncDuration.Observe(took.Seconds()) }

// DiskChecked records a reading of the data volume: free bytes, the reserve
// in bytes, and whether free space is below it.
func (m *Metrics) DiskChecked(free, reserve uint64, full bool) {
	m.diskFree.Set(float64(free))
	m.diskReserve.Set(float64(reserve))
	if full {
		m.diskFull.Set(1)
	} else {
		m.diskFull.Set(0)
	}
}

// timeoutLabel is "start_to_close" for engine.TimeoutStartToClose and so on.
func timeoutLabel(kind string) string {
	switch kind {
	case engine.TimeoutStartToClose:
		return "start_to_close"
	case engine.TimeoutHeartbeat:
		return "heartbeat"
	case engine.TimeoutScheduleToStart:
		return "schedule_to_start"
	case engine.TimeoutScheduleToClose:
		return "schedule_to_close"
	}
	return strings.ToLower(kind)
}

// gaugeCollector reads the engine's counts at every scrape, so the gauges
// are exact and cost nothing between scrapes.
type gaugeCollector struct{ m *Metrics }

var (
	descActivities = prometheus.NewDesc("durable_activities",
		"Activities that are scheduled and not finished, by task queue and state: scheduled, started, retrying, dead_lettered.",
		[]string{"task_queue", "state"}, nil)
	descDeadLetters = prometheus.NewDesc("durable_dead_letters",
		"Activities waiting in the dead-letter queue for a redrive.", nil, nil)
	descPolls = prometheus.NewDesc("durable_polls_parked",
		"Long polls of workers waiting for a task, by task queue and kind: workflow, activity.",
		[]string{"task_queue", "kind"}, nil)
	descWatchers = prometheus.NewDesc("durable_watch_streams",
		"Open Watch streams (consoles, wf watch).", nil, nil)
	descWritesRefused = prometheus.NewDesc("durable_writes_refused",
		"1 while changes of state are refused (the disk is below its reserve, the store was opened read-only, or a sync failed), else 0.", nil, nil)
	descNodeInfo = prometheus.NewDesc("durable_node_info",
		"Always 1; its label names this durabled among the nodes of its store (--node).",
		[]string{"node"}, nil)
	descNodesAlive = prometheus.NewDesc("durable_nodes_alive",
		"Nodes of the store alive as this node sees them at the scrape (heard from within the store's liveness window; 1 on Badger). Absent when the store did not answer.",
		nil, nil)
)

// nodesScrapeTimeout bounds the store read behind durable_nodes_alive, so
// that a database that does not answer cannot hold a scrape.
const nodesScrapeTimeout = 2 * time.Second

func (g gaugeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descActivities
	ch <- descDeadLetters
	ch <- descPolls
	ch <- descWatchers
	ch <- descWritesRefused
	ch <- descNodeInfo
	ch <- descNodesAlive
}

func (g gaugeCollector) Collect(ch chan<- prometheus.Metric) {
	g.m.mu.Lock()
	e, self := g.m.engine, g.m.self
	g.m.mu.Unlock()
	if e == nil {
		return
	}
	g.collectNodes(ch, e, self)
	gs := e.Gauges()
	type qs struct{ queue, state string }
	acts := map[qs]int{}
	dead := 0
	for _, a := range gs.Activities {
		acts[qs{g.m.queues.get(a.TaskQueue), stateLabel(a.State)}] += a.Count
		if a.State == durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED {
			dead += a.Count
		}
	}
	for k, n := range acts {
		ch <- prometheus.MustNewConstMetric(descActivities, prometheus.GaugeValue, float64(n), k.queue, k.state)
	}
	ch <- prometheus.MustNewConstMetric(descDeadLetters, prometheus.GaugeValue, float64(dead))
	type qk struct{ queue, kind string }
	polls := map[qk]int{}
	for _, p := range gs.Polls {
		kind := "activity"
		if p.Kind == engine.WorkflowTask {
			kind = "workflow"
		}
		polls[qk{g.m.queues.get(p.TaskQueue), kind}] += p.Parked
	}
	for k, n := range polls {
		ch <- prometheus.MustNewConstMetric(descPolls, prometheus.GaugeValue, float64(n), k.queue, k.kind)
	}
	ch <- prometheus.MustNewConstMetric(descWatchers, prometheus.GaugeValue, float64(gs.Watchers))
	refused := 0.0
	if e.WritesRefused() != nil {
		refused = 1
	}
	ch <- prometheus.MustNewConstMetric(descWritesRefused, prometheus.GaugeValue, refused)
}

// stateLabel is "retrying" for ACTIVITY_STATE_RETRYING and so on.
func stateLabel(s durablev1.ActivityState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "ACTIVITY_STATE_"))
}

// labelCap hands out label values as they come, up to a bound; past it every
// new value becomes otherLabel, so a buggy client that invents activity types
// cannot make the metrics grow without bound.
type labelCap struct {
	mu   sync.Mutex
	max  int
	seen map[string]struct{}
}

func newLabelCap(max int) *labelCap { return &labelCap{max: max, seen: map[string]struct{}{}} }

func (c *labelCap) get(v string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[v]; ok {
		return v
	}
	if len(c.seen) >= c.max {
		return otherLabel
	}
	c.seen[v] = struct{}{}
	return v
}

// collectNodes reports this node's name and how many nodes are alive.
func (g gaugeCollector) collectNodes(ch chan<- prometheus.Metric, e *engine.Engine, self engine.NodeSelf) {
	ch <- prometheus.MustNewConstMetric(descNodeInfo, prometheus.GaugeValue, 1, self.Name)
	ctx, cancel := context.WithTimeout(context.Background(), nodesScrapeTimeout)
	defer cancel()
	r, err := e.ListNodes(ctx, self)
	if err != nil {
		return
	}
	alive := 0
	for _, n := range r.GetNodes() {
		if n.GetAlive() {
			alive++
		}
	}
	ch <- prometheus.MustNewConstMetric(descNodesAlive, prometheus.GaugeValue, float64(alive))
}
