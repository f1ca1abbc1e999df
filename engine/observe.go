package engine

import "time"

// Observer hears what the engine does, for metrics. The engine reports a
// transition only once it is published (after the sync that made it
// durable, see batch.go), from the batcher's goroutine and outside the
// engine's locks; methods must be quick, must not block and must not call
// back into the engine. Options.Observer defaults to one that does nothing.
type Observer interface {
	// AttemptStarted: an attempt was leased to a worker, waited after it
	// became due (the schedule-to-start latency; for attempt > 1, how late
	// the retry was handed out).
	AttemptStarted(activityType string, attempt int32, waited time.Duration)
	// AttemptEnded: a running attempt ended after took, with result.
	AttemptEnded(activityType string, result AttemptResult, took time.Duration)
	// TimedOut: an activity's timeout of kind (TimeoutStartToClose,
	// TimeoutHeartbeat, TimeoutScheduleToStart, TimeoutScheduleToClose) ran
	// out.
	TimedOut(activityType, kind string)
	// DeadLettered: an activity was parked in the DLQ.
	DeadLettered(activityType string)
	// Redriven: a dead letter was put back in its queue.
	Redriven(activityType string)
	// BatchCommitted: a store transaction carrying transitions committed
	// after took.
	BatchCommitted(transitions int, took time.Duration)
	// Synced: a sync made the committed batches durable after took.
	Synced(took time.Duration)
}

// AttemptResult is how a running attempt ended, as metrics count it: each
// ended attempt has exactly one.
type AttemptResult string

const (
	// AttemptCompleted: the worker reported a result.
	AttemptCompleted AttemptResult = "completed"
	// AttemptFailed: the worker reported a failure and the activity failed
	// for good (non-retryable).
	AttemptFailed AttemptResult = "failed"
	// AttemptRetried: the worker reported a failure and another attempt is
	// due after a backoff.
	AttemptRetried AttemptResult = "retried"
	// AttemptDeadLettered: the worker reported a failure and the activity
	// was dead-lettered (attempts or budget ran out).
	AttemptDeadLettered AttemptResult = "dead_lettered"
	// AttemptTimedOut: the attempt's lease ran out (start-to-close or
	// heartbeat timeout, or the schedule-to-close budget cut it short);
	// whether a retry or a dead letter follows is counted elsewhere.
	AttemptTimedOut AttemptResult = "timed_out"
)

// nopObserver is the Observer used when none is given.
type nopObserver struct{}

func (nopObserver) AttemptStarted(string, int32, time.Duration)       {}
func (nopObserver) AttemptEnded(string, AttemptResult, time.Duration) {}
func (nopObserver) TimedOut(string, string)                           {}
func (nopObserver) DeadLettered(string)                               {}
func (nopObserver) Redriven(string)                                   {}
func (nopObserver) BatchCommitted(int, time.Duration)                 {}
func (nopObserver) Synced(time.Duration)                              {}

// observation is one thing a transition did that the Observer hears about
// once the change is published.
type observation struct {
	kind         observationKind
	activityType string
	attempt      int32
	result       AttemptResult
	timeout      string
	d            time.Duration
}

type observationKind uint8

const (
	obsStarted observationKind = iota + 1
	obsEnded
	obsTimedOut
	obsDeadLettered
	obsRedriven
)

func (c *change) observe(o observation) { c.observed = append(c.observed, o) }

// report hands a published change's observations to o.
func report(o Observer, c *change) {
	for _, ob := range c.observed {
		switch ob.kind {
		case obsStarted:
			o.AttemptStarted(ob.activityType, ob.attempt, ob.d)
		case obsEnded:
			o.AttemptEnded(ob.activityType, ob.result, ob.d)
		case obsTimedOut:
			o.TimedOut(ob.activityType, ob.timeout)
		case obsDeadLettered:
			o.DeadLettered(ob.activityType)
		case obsRedriven:
			o.Redriven(ob.activityType)
		}
	}
}
