package engine

import (
	"log/slog"
	"time"
)

// Options configure an Engine. Zero fields take the defaults named on them.
type Options struct {
	// Clock is the source of time; default SystemClock.
	Clock Clock
	// Seed seeds the generator of the jitter draws; 0 means a seed from the
	// clock.
	Seed int64
	// Jitter replaces the full-jitter step (delay = U * d). Tests set it to
	// the identity to see the plain backoff.
	Jitter func(d time.Duration) time.Duration
	// DLQAfterAttempts is the max_attempts of a policy that leaves it 0;
	// default 5.
	DLQAfterAttempts int
	// PollTimeout bounds a long poll; default 20 s.
	PollTimeout time.Duration
	// WorkflowTaskTimeout is the lease of a workflow task; default 10 s.
	WorkflowTaskTimeout time.Duration
	// DefaultStartToClose is used for an activity scheduled without any
	// timeout; default 10 min.
	DefaultStartToClose time.Duration
	// MaxAttemptRecords bounds the attempt trail kept per activity; default 100.
	MaxAttemptRecords int
	// Logger receives the engine's logs; default slog.Default().
	Logger *slog.Logger
	// Observer hears about attempts, timeouts, dead letters, redrives,
	// commits and syncs, for metrics; default one that does nothing.
	Observer Observer
	// AuditRetention is how long audit records are kept; default 90 days.
	AuditRetention time.Duration
	// StatsRetention is how long attempt durations are kept by the hour,
	// the longest window stats can be asked for; older hours still count in
	// the all-time figures. Default 30 days.
	StatsRetention time.Duration
	// AttemptRetention is how long a finished activity is kept with its
	// attempt trail; default 7 days.
	AttemptRetention time.Duration
	// MaxWatchers bounds the Watch streams open at once; one more is
	// refused with a *WatchLimitError. Default DefaultMaxWatchers.
	MaxWatchers int

	// ReadOnly, when set, says the store was opened read-only: the engine
	// refuses every change of state with this error for its whole life
	// (wrap ErrNoSpace in it when the disk was full; see gate.go).
	ReadOnly error
	// WriteFailedFunc, when set, hears every error of a store commit or
	// sync before the callers of the batch are answered, so that a watcher
	// of the disk can look at it again at once; it may call RefuseWrites,
	// and the callers then get that refusal. It runs on the batcher's
	// goroutine: it must be quick.
	WriteFailedFunc func(err error)
	// WritesChangedFunc, when set, hears the state of the write gate at
	// New and then every change of it: the error writes are now refused
	// with, or nil when they are allowed (health checks follow it). It must
	// not call RefuseWrites or AllowWrites.
	WritesChangedFunc func(refused error)
	// WaitWindow is how far ahead of now the engine keeps activity tasks
	// and budget and workflow timers in memory; what is due later stays in
	// the store until the window reaches it (horizon.go). Default
	// DefaultWaitWindow.
	WaitWindow time.Duration
	// SharedSweep is, on a store several nodes share, how often the timer
	// loop looks at the store's timers even when nothing it knows of is
	// due: the longest a timer set by a node that died (or set through
	// another node, earlier than any this node knows) waits past its due
	// time. Default DefaultSharedSweep (1 s).
	SharedSweep time.Duration
}

// DefaultMaxWatchers is the default of Options.MaxWatchers: consoles and
// dashboards of a team, with room, while each one's buffer (watchBuffer
// events) stays a bounded share of memory.
const DefaultMaxWatchers = 256

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.DLQAfterAttempts <= 0 {
		o.DLQAfterAttempts = 5
	}
	if o.PollTimeout <= 0 {
		o.PollTimeout = 20 * time.Second
	}
	if o.WorkflowTaskTimeout <= 0 {
		o.WorkflowTaskTimeout = 10 * time.Second
	}
	if o.DefaultStartToClose <= 0 {
		o.DefaultStartToClose = 10 * time.Minute
	}
	if o.MaxAttemptRecords <= 0 {
		o.MaxAttemptRecords = 100
	}
	if o.WaitWindow <= 0 {
		o.WaitWindow = DefaultWaitWindow
	}
	if o.SharedSweep <= 0 {
		o.SharedSweep = DefaultSharedSweep
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.AuditRetention <= 0 {
		o.AuditRetention = DefaultAuditRetention
	}
	if o.StatsRetention <= 0 {
		o.StatsRetention = DefaultStatsRetention
	}
	if o.AttemptRetention <= 0 {
		o.AttemptRetention = DefaultAttemptRetention
	}
	if o.MaxWatchers <= 0 {
		o.MaxWatchers = DefaultMaxWatchers
	}
	return o
}
