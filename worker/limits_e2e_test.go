package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/server"
	"github.com/tinyllm/durable/worker"
	"github.com/tinyllm/durable/workflow"
)

// smallPayload is the daemon's payload bound in these tests, so that
// oversized payloads are cheap to make.
const smallPayload = 1024

// daemonKind says which daemon a limits test runs against.
type daemonKind int

const (
	// inProcess is the engine and server inside the test binary.
	inProcess daemonKind = iota
	// durabled is the real binary, run with --max-payload.
	durabled
)

// setupSmall starts a daemon with a payload bound of smallPayload and dials
// it. With told false, the worker's client strips the bound from every
// activity task, so the worker learns of it only from the daemon's refusal,
// as it would from a daemon that does not send it.
func setupSmall(t *testing.T, kind daemonKind, told bool) *client.Client {
	t.Helper()
	var addr string
	switch kind {
	case durabled:
		addr = testdaemon.Exec(t, t.TempDir(), "--max-payload", strconv.Itoa(smallPayload)).Addr
	default:
		addr = testdaemon.StartServer(t, engine.Options{Jitter: func(d time.Duration) time.Duration { return d }},
			server.Options{MaxPayload: smallPayload})
	}
	if told {
		return dial(t, addr)
	}
	strip := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if r, ok := reply.(*durablev1.PollActivityTaskResponse); ok {
			for _, task := range r.GetTasks() {
				task.MaxPayload = 0
			}
		}
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.WithIdentity(t.Name()), client.WithDialOptions(grpc.WithUnaryInterceptor(strip)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// logCapture keeps every log record, flattened to one line, by level.
type logCapture struct {
	sink  *logSink
	attrs []slog.Attr
}

type logSink struct {
	mu    sync.Mutex
	lines map[slog.Level][]string
}

func newLogCapture() *logCapture {
	return &logCapture{sink: &logSink{lines: map[slog.Level][]string{}}}
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range c.attrs {
		write(a)
	}
	r.Attrs(write)
	c.sink.mu.Lock()
	defer c.sink.mu.Unlock()
	c.sink.lines[r.Level] = append(c.sink.lines[r.Level], b.String())
	return nil
}

func (c *logCapture) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logCapture{sink: c.sink, attrs: append(append([]slog.Attr{}, c.attrs...), attrs...)}
}

func (c *logCapture) WithGroup(string) slog.Handler { return c }

// errorsSaying returns the ERROR lines that contain every one of words.
func (c *logCapture) errorsSaying(words ...string) []string {
	c.sink.mu.Lock()
	defer c.sink.mu.Unlock()
	var out []string
	for _, l := range c.sink.lines[slog.LevelError] {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

// TestRefusedCommandsSurface: a workflow whose task the daemon refuses —
// an activity input over --max-payload, a retry policy out of bounds — is
// failed, not retried forever: Run.Get returns a CommandsRefused error naming
// the command, the field and the bound, WorkflowTaskFailed in history says
// the same, and the worker logged it at ERROR.
func TestRefusedCommandsSurface(t *testing.T) {
	t.Parallel()
	overLimit := []string{"commands[0].input", "must be at most 1024 bytes", "got 2050", `ScheduleActivity of Echo, activity id "1"`}
	tests := []struct {
		name   string
		daemon daemonKind
		opts   workflow.ActivityOptions
		input  string
		want   []string // in the failure's message
	}{
		{"InputOverPayloadLimit", inProcess, workflow.ActivityOptions{}, strings.Repeat("x", 2*smallPayload), overLimit},
		{"InputOverPayloadLimitOnDurabled", durabled, workflow.ActivityOptions{}, strings.Repeat("x", 2*smallPayload), overLimit},
		{"RetryPolicyOutOfBounds", inProcess, workflow.ActivityOptions{RetryPolicy: &workflow.RetryPolicy{MaximumAttempts: 1_000_000}}, "small",
			[]string{"commands[0].activity_options.retry_policy.max_attempts", "must be in [0, 10000]", "ScheduleActivity of Echo"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := setupSmall(t, tc.daemon, true)
			logs := newLogCapture()
			queue := "refused-" + tc.name
			wf := func(ctx workflow.Context) (string, error) {
				ctx = workflow.WithActivityOptions(ctx, tc.opts)
				var out string
				err := workflow.ExecuteActivity(ctx, "Echo", tc.input).Get(ctx, &out)
				return out, err
			}
			startWorker(t, c, queue, worker.Options{Logger: slog.New(logs)}, func(w *worker.Worker) {
				w.RegisterWorkflowWithName(wf, "Refused")
				w.RegisterActivityWithName(func(ctx context.Context, s string) (string, error) { return s, nil }, "Echo")
			})
			ctx := testCtx(t)
			began := time.Now()
			run, err := c.Start(ctx, "Refused", nil, client.StartOptions{TaskQueue: queue})
			if err != nil {
				t.Fatal(err)
			}

			err = run.Get(ctx, nil)
			t.Logf("start to failed workflow: %v", time.Since(began))
			var ae *activity.Error
			if !client.IsWorkflowFailed(err) || !errors.As(err, &ae) {
				t.Fatalf("Run.Get = %v, want a failed workflow", err)
			}
			if ae.Type != activity.TypeCommandsRefused || !ae.NoRetry {
				t.Errorf("failure = %s (non-retryable %v), want %s non-retryable", ae.Type, ae.NoRetry, activity.TypeCommandsRefused)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Run.Get error %q does not say %q", err, w)
				}
			}

			h := history(t, c, run.ID)
			var taskFailed *durablev1.HistoryEvent
			for _, ev := range h {
				if ev.GetType() == durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_FAILED {
					taskFailed = ev
				}
			}
			if taskFailed == nil || taskFailed.GetFailure().GetType() != activity.TypeCommandsRefused {
				t.Fatalf("no WorkflowTaskFailed of type CommandsRefused in history: %v", h)
			}
			for _, w := range tc.want {
				if !strings.Contains(taskFailed.GetFailure().GetMessage(), w) {
					t.Errorf("WorkflowTaskFailed says %q, not %q", taskFailed.GetFailure().GetMessage(), w)
				}
			}
			if n := countEvents(h, durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED); n != 1 {
				t.Errorf("%d workflow tasks ran, want 1: the refused task must not be retried", n)
			}
			if last := h[len(h)-1].GetType(); last != durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_FAILED {
				t.Errorf("history ends with %v, want WorkflowExecutionFailed", last)
			}
			if n := countEvents(h, durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED); n != 0 {
				t.Errorf("%d activities scheduled by refused commands", n)
			}
			waitFor(t, "an ERROR naming "+tc.want[0], func() bool {
				return len(logs.errorsSaying(tc.want[0], "refused")) > 0
			})
		})
	}
}

// oversizedCase is one way an attempt can produce a payload over the bound.
type oversizedCase struct {
	name string
	// activity is the activity under test; release unblocks one that would
	// otherwise hang on.
	activity func(release <-chan struct{}) any
	// want are words of the PayloadTooLarge message.
	want []string
}

var oversizedCases = []oversizedCase{
	{"Result", func(<-chan struct{}) any {
		return func(ctx context.Context) (string, error) { return strings.Repeat("r", 4*smallPayload), nil }
	}, []string{"the activity's result", "4098 bytes", "1024"}},
	{"FailureDetails", func(<-chan struct{}) any {
		return func(ctx context.Context) error {
			return &activity.Error{Type: "Boom", Message: "exploded", Details: make([]byte, 2*smallPayload)}
		}
	}, []string{"the activity's failure details", "2048 bytes", "1024", "Boom: exploded"}},
	{"FailureMessage", func(<-chan struct{}) any {
		return func(ctx context.Context) error { return activity.NewError("Boom", strings.Repeat("m", 3*smallPayload)) }
	}, []string{"the activity's failure message", "3072 bytes", "1024", "Boom: mmm"}},
	// The activity ignores its context after the heartbeat: the attempt must
	// still end at once, not at its heartbeat timeout.
	{"HeartbeatDetails", func(release <-chan struct{}) any {
		return func(ctx context.Context) error {
			activity.RecordHeartbeat(ctx, make([]byte, 5*smallPayload))
			<-release
			return ctx.Err()
		}
	}, []string{"the heartbeat's details", "5120 bytes", "1024"}},
}

// TestOversizedResultFailsAsPayloadTooLarge: an activity result over
// --max-payload fails the attempt as a non-retryable PayloadTooLarge after
// one attempt — not a StartToCloseTimeout after the full timeout — and the
// workflow sees an *activity.Error of that type, whether the worker was told
// the bound with the task or learns it from the daemon's refusal.
func TestOversizedResultFailsAsPayloadTooLarge(t *testing.T) {
	t.Parallel()
	testOversized(t, oversizedCases[0], durabled)
}

// TestOversizedFailureAndHeartbeatFailAsPayloadTooLarge: failure details,
// failure messages and heartbeat details over --max-payload end the attempt
// the same way; an oversized heartbeat does so at once, even while the
// activity function goes on running.
func TestOversizedFailureAndHeartbeatFailAsPayloadTooLarge(t *testing.T) {
	t.Parallel()
	for _, tc := range oversizedCases[1:] {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testOversized(t, tc, inProcess)
		})
	}
}

// testOversized runs tc in process, with the bound sent and without it, and
// with the bound sent on also, when asked, the real durabled.
func testOversized(t *testing.T, tc oversizedCase, also daemonKind) {
	type daemonRun struct {
		name   string
		daemon daemonKind
		told   bool
	}
	runs := []daemonRun{
		{"BoundSentWithTask", inProcess, true},
		{"BoundLearntFromRefusal", inProcess, false},
	}
	if also == durabled {
		runs = append(runs, daemonRun{"BoundSentWithTaskOnDurabled", durabled, true})
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			t.Parallel()
			c := setupSmall(t, run.daemon, run.told)
			logs := newLogCapture()
			queue := "oversized-" + tc.name
			release := make(chan struct{})
			wf := func(ctx workflow.Context) (string, error) {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
					StartToCloseTimeout: time.Hour,
					HeartbeatTimeout:    time.Hour,
					RetryPolicy:         &workflow.RetryPolicy{InitialInterval: 10 * time.Millisecond, MaximumAttempts: 5},
				})
				err := workflow.ExecuteActivity(ctx, "Oversized", nil).Get(ctx, nil)
				var ae *activity.Error
				if !errors.As(err, &ae) {
					return "", fmt.Errorf("activity returned %v, want an *activity.Error", err)
				}
				return fmt.Sprintf("%s non-retryable=%v: %s", ae.Type, ae.NoRetry, ae.Message), nil
			}
			startWorker(t, c, queue, worker.Options{Logger: slog.New(logs), StopTimeout: time.Second}, func(w *worker.Worker) {
				w.RegisterWorkflowWithName(wf, "Oversized")
				w.RegisterActivityWithName(tc.activity(release), "Oversized")
			})
			t.Cleanup(func() { close(release) }) // before the worker stops
			ctx := testCtx(t)
			began := time.Now()
			run, err := c.Start(ctx, "Oversized", nil, client.StartOptions{TaskQueue: queue})
			if err != nil {
				t.Fatal(err)
			}
			var saw string
			if err := run.Get(ctx, &saw); err != nil {
				t.Fatal(err)
			}
			t.Logf("start to the workflow seeing %s: %v (start-to-close timeout 1h)", activity.TypePayloadTooLarge, time.Since(began))
			if !strings.HasPrefix(saw, activity.TypePayloadTooLarge+" non-retryable=true: ") {
				t.Fatalf("the workflow saw %q, want a non-retryable %s", saw, activity.TypePayloadTooLarge)
			}
			for _, w := range tc.want {
				if !strings.Contains(saw, w) {
					t.Errorf("the workflow saw %q, which does not say %q", saw, w)
				}
			}

			h := history(t, c, run.ID)
			if n := countEvents(h, durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED); n != 1 {
				t.Fatalf("%d ActivityTaskFailed events, want 1", n)
			}
			for _, ev := range h {
				if ev.GetType() == durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_FAILED {
					if ev.GetAttempt() != 1 || ev.GetFailure().GetType() != activity.TypePayloadTooLarge || !ev.GetFailure().GetNonRetryable() {
						t.Errorf("ActivityTaskFailed = attempt %d, %v; want attempt 1, non-retryable PayloadTooLarge", ev.GetAttempt(), ev.GetFailure())
					}
				}
			}
			// The report lands before the worker may have logged it.
			waitFor(t, "an ERROR naming "+tc.want[0], func() bool {
				return len(logs.errorsSaying(activity.TypePayloadTooLarge, tc.want[0])) > 0
			})
		})
	}
}
