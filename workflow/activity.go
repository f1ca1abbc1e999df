package workflow

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// ActivityOptions say where and how an activity runs. Zero fields take the
// daemon's defaults.
type ActivityOptions struct {
	// ActivityID names the activity within the workflow; empty means the
	// next number of the workflow's own sequence. It is the second half of
	// activity.IdempotencyKey, "<workflow_id>/<activity_id>", so it must be
	// unique within the workflow, the same on every replay, and may not
	// contain '/' (two activities could then share a key). Set it on a ctx
	// used for one ExecuteActivity call only.
	ActivityID string
	// TaskQueue is the queue of the workers that run it; empty means the
	// workflow's own queue.
	TaskQueue string
	// StartToCloseTimeout bounds one attempt.
	StartToCloseTimeout time.Duration
	// HeartbeatTimeout, if set, fails an attempt that goes this long without
	// calling activity.RecordHeartbeat.
	HeartbeatTimeout time.Duration
	// ScheduleToStartTimeout bounds the wait in the queue for a worker.
	ScheduleToStartTimeout time.Duration
	// ScheduleToCloseTimeout bounds all attempts together, backoffs included.
	ScheduleToCloseTimeout time.Duration
	// RetryPolicy decides the backoff between attempts and when to give up;
	// nil means the daemon's defaults.
	RetryPolicy *RetryPolicy
}

// RetryPolicy is the backoff d_n = min(InitialInterval *
// BackoffCoefficient^(n-1), MaximumInterval), jittered by the daemon, and the
// attempt whose failure dead-letters the activity.
type RetryPolicy struct {
	// InitialInterval is the backoff after the first failure; default 1 s.
	InitialInterval time.Duration
	// BackoffCoefficient is the growth factor; default 2.
	BackoffCoefficient float64
	// MaximumInterval caps one backoff; default 60 s.
	MaximumInterval time.Duration
	// MaximumAttempts is the attempt that, failing, dead-letters the
	// activity; 0 means the daemon's default (5).
	MaximumAttempts int
	// NonRetryableErrorTypes are failure types that end the activity at once.
	NonRetryableErrorTypes []string
}

// WithActivityOptions returns a ctx whose ExecuteActivity calls use opts.
func WithActivityOptions(ctx Context, opts ActivityOptions) Context {
	return ctx.state().with(func(c *wfContext) { c.actOpts = opts })
}

func (o ActivityOptions) proto() *durablev1.ActivityOptions {
	p := &durablev1.ActivityOptions{
		TaskQueue:              o.TaskQueue,
		StartToCloseTimeout:    protoDuration(o.StartToCloseTimeout),
		HeartbeatTimeout:       protoDuration(o.HeartbeatTimeout),
		ScheduleToStartTimeout: protoDuration(o.ScheduleToStartTimeout),
		ScheduleToCloseTimeout: protoDuration(o.ScheduleToCloseTimeout),
	}
	if r := o.RetryPolicy; r != nil {
		p.RetryPolicy = &durablev1.RetryPolicy{
			InitialMs:     r.InitialInterval.Milliseconds(),
			Backoff:       r.BackoffCoefficient,
			MaxIntervalMs: r.MaximumInterval.Milliseconds(),
			MaxAttempts:   int32(r.MaximumAttempts),
			NonRetryable:  r.NonRetryableErrorTypes,
		}
	}
	return p
}

// protoDuration leaves a zero duration unset, which means "default".
func protoDuration(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}

// ExecuteActivity schedules an activity and returns its future. activityFn
// is the registered function or its registered name; input is encoded with
// the worker's converter (nil for an activity without input). The options
// come from WithActivityOptions.
//
// A dead-lettered activity keeps its future pending: the workflow waits until
// an operator redrives it.
func ExecuteActivity(ctx Context, activityFn any, input any) Future {
	c := ctx.state()
	e := c.env
	name := activityName(activityFn)
	f := &future{env: e}
	payload, err := e.conv.ToPayload(input)
	if err != nil {
		f.resolve(nil, fmt.Errorf("workflow: encode input of activity %s: %w", name, err))
		return f
	}
	id := c.actOpts.ActivityID
	if err := checkActivityID(id, e.activities); err != nil {
		f.resolve(nil, fmt.Errorf("workflow: activity %s: %w", name, err))
		return f
	}
	if id == "" {
		id = e.nextID()
		for e.activities[id] != nil { // a number the workflow chose as an id itself
			id = e.nextID()
		}
	}
	e.command(&durablev1.Command{
		Type:            durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY,
		ActivityId:      id,
		ActivityType:    name,
		Input:           payload,
		ActivityOptions: c.actOpts.proto(),
	})
	e.activities[id] = f
	e.applyEarly(id, f)
	return f
}

// ErrBadActivityID is wrapped by the error of an ExecuteActivity whose
// ActivityOptions.ActivityID cannot be used; nothing was scheduled.
var ErrBadActivityID = errors.New("bad activity id")

// checkActivityID refuses, before anything is sent, a chosen activity id the
// daemon would refuse: one with '/', or one the workflow already used.
func checkActivityID(id string, used map[string]*future) error {
	switch {
	case id == "":
		return nil
	case strings.Contains(id, "/"):
		return fmt.Errorf("%w %q: it must not contain '/', since the idempotency key <workflow_id>/<activity_id> of two activities could then be the same", ErrBadActivityID, id)
	case used[id] != nil:
		return fmt.Errorf("%w %q: the workflow already scheduled an activity under it", ErrBadActivityID, id)
	}
	return nil
}

func activityName(fn any) string {
	if s, ok := fn.(string); ok {
		return s
	}
	return FuncName(fn)
}

// FuncName returns the name a function is registered under by default: its
// name without the package path ("Charge" for shop.Charge, "(*Svc).Charge"
// style receivers lose the receiver: "Charge").
func FuncName(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func {
		panic(fmt.Sprintf("workflow: %T is not a function", fn))
	}
	full := runtime.FuncForPC(v.Pointer()).Name()
	name := full[strings.LastIndex(full, ".")+1:]
	return strings.TrimSuffix(name, "-fm")
}

// ActivityError is what Future.Get returns for an activity that failed for
// good (non-retryable). errors.As finds the *activity.Error inside it.
type ActivityError struct {
	ActivityID   string
	ActivityType string
	Cause        *activity.Error
}

// Error names the activity and its failure.
func (e *ActivityError) Error() string {
	return fmt.Sprintf("activity %s (id %s) failed: %v", e.ActivityType, e.ActivityID, e.Cause)
}

// Unwrap returns the *activity.Error with the failure's type.
func (e *ActivityError) Unwrap() error { return e.Cause }
