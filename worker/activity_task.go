package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Causes of an activity context's cancellation, as context.Cause reports them.
var (
	// ErrLeaseLost cancels an attempt whose lease the daemon no longer
	// honours (it timed out and was retried, or the activity is gone): its
	// result would be dropped, so it should stop.
	ErrLeaseLost = errors.New("worker: activity lease lost")
	// ErrWorkerShutdown cancels attempts still running when Stop's grace
	// period ends; they are reported failed and retried elsewhere.
	ErrWorkerShutdown = errors.New("worker: shutting down")
)

type activityDef struct {
	fn     reflect.Value
	in     reflect.Type
	result bool
}

var (
	ctxType   = reflect.TypeFor[context.Context]()
	errorType = reflect.TypeFor[error]()
)

func newActivityDef(fn any) (*activityDef, error) {
	v := reflect.ValueOf(fn)
	t := v.Type()
	if t.Kind() != reflect.Func {
		return nil, fmt.Errorf("activity must be a function, got %T", fn)
	}
	if t.NumIn() < 1 || t.NumIn() > 2 || t.In(0) != ctxType {
		return nil, fmt.Errorf("activity %s must take (context.Context[, input])", t)
	}
	if t.NumOut() < 1 || t.NumOut() > 2 || t.Out(t.NumOut()-1) != errorType {
		return nil, fmt.Errorf("activity %s must return ([result,] error)", t)
	}
	d := &activityDef{fn: v, result: t.NumOut() == 2}
	if t.NumIn() == 2 {
		d.in = t.In(1)
	}
	return d, nil
}

// attempt is one leased activity attempt being run.
type attempt struct {
	w      *Worker
	task   *durablev1.ActivityTask
	ctx    context.Context
	cancel context.CancelCauseFunc
	hb     *heartbeater
	// deadline cancels a heartbeating attempt when its lease would end;
	// each heartbeat moves it.
	deadline *time.Timer
	lost     atomic.Bool
	reported atomic.Bool
}

func (w *Worker) startAttempt(t *durablev1.ActivityTask, release func()) {
	a := &attempt{w: w, task: t}
	ctx, cancel := context.WithCancelCause(context.Background())
	a.cancel = cancel
	deadline := t.GetDeadline().AsTime()
	hbTimeout := t.GetHeartbeatTimeout().AsDuration()
	var stopDeadline context.CancelFunc = func() {}
	if hbTimeout > 0 {
		a.deadline = time.AfterFunc(time.Until(deadline), func() { cancel(context.DeadlineExceeded) })
	} else if t.GetDeadline() != nil {
		ctx, stopDeadline = context.WithDeadline(ctx, deadline)
	}
	a.hb = newHeartbeater(a, hbTimeout)
	a.ctx = activity.WithInfo(ctx, &activity.Info{
		WorkflowID:       t.GetWorkflowId(),
		WorkflowType:     t.GetWorkflowType(),
		ActivityID:       t.GetActivityId(),
		ActivityType:     t.GetActivityType(),
		TaskQueue:        t.GetTaskQueue(),
		Attempt:          int(t.GetAttempt()),
		MaxAttempts:      int(t.GetMaxAttempts()),
		HeartbeatDetails: t.GetHeartbeatDetails(),
		HeartbeatTimeout: hbTimeout,
		ScheduledTime:    t.GetScheduledTime().AsTime(),
		StartedTime:      t.GetStartedTime().AsTime(),
		Deadline:         deadline,
		HeartbeatFunc:    a.hb.record,
	})

	w.runningMu.Lock()
	w.running[a] = struct{}{}
	w.runningMu.Unlock()
	w.attemptsWG.Add(1)
	w.runners.run(func() {
		defer w.attemptsWG.Done()
		defer release()
		defer func() {
			w.runningMu.Lock()
			delete(w.running, a)
			w.runningMu.Unlock()
			stopDeadline()
			if a.deadline != nil {
				a.deadline.Stop()
			}
			cancel(context.Canceled)
		}()
		a.run()
	})
}

func (a *attempt) run() {
	a.w.mu.Lock()
	def := a.w.activities[a.task.GetActivityType()]
	a.w.mu.Unlock()
	if def == nil {
		a.report(nil, activity.FailureFromError(activity.NewError(activity.TypeActivityNotRegistered,
			fmt.Sprintf("activity type %s is not registered on worker %s", a.task.GetActivityType(), a.w.opts.Identity))))
		return
	}
	result, failure := a.call(def)
	a.hb.flush()
	a.report(result, failure)
}

// call runs the activity function, turning its outcome into a payload or a
// Failure.
func (a *attempt) call(def *activityDef) (result []byte, failure *durablev1.Failure) {
	defer func() {
		if r := recover(); r != nil {
			// The stack is the worker's own detail, not the activity's
			// payload: it is cut to the bound rather than turning a
			// retryable panic into a PayloadTooLarge.
			stack := debug.Stack()
			if limit := a.task.GetMaxPayload(); limit > 0 && int64(len(stack)) > limit {
				stack = stack[:limit]
			}
			result, failure = nil, activity.FailureFromError(&activity.Error{Type: activity.TypePanic, Message: fmt.Sprint(r), Details: stack})
		}
	}()
	conv := a.w.c.Converter()
	args := []reflect.Value{reflect.ValueOf(a.ctx)}
	if def.in != nil {
		v := reflect.New(def.in)
		if err := conv.FromPayload(a.task.GetInput(), v.Interface()); err != nil {
			return nil, activity.FailureFromError(activity.NewNonRetryable(activity.TypeBadInput, err.Error()))
		}
		args = append(args, v.Elem())
	}
	out := def.fn.Call(args)
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		return nil, failureOf(err, a.ctx)
	}
	if !def.result {
		return nil, nil
	}
	b, err := conv.ToPayload(out[0].Interface())
	if err != nil {
		return nil, activity.FailureFromError(activity.NewNonRetryable(activity.TypeBadResult, err.Error()))
	}
	return b, nil
}

// failureOf maps an activity's error to the Failure the daemon decides on,
// through activity.FailureFromError: an *activity.Error anywhere in the chain
// keeps its type and flag; a context deadline is a Timeout. What only the
// context knows is added first: a context cancelled because the lease's
// deadline came is a Timeout too, one cancelled by Stop a WorkerShutdown.
func failureOf(err error, ctx context.Context) *durablev1.Failure {
	var ae *activity.Error
	if !errors.As(err, &ae) && errors.Is(err, context.Canceled) {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, context.DeadlineExceeded):
			err = &activity.Error{Type: activity.TypeTimeout, Cause: err}
		case errors.Is(cause, ErrWorkerShutdown):
			err = &activity.Error{Type: activity.TypeWorkerShutdown, Cause: err}
		}
	}
	return activity.FailureFromError(err)
}

// report sends the attempt's outcome once; a later call (the attempt
// finishing after Stop gave up on it, or after abort) does nothing.
func (a *attempt) report(result []byte, failure *durablev1.Failure) {
	if !a.claimReport() {
		return
	}
	a.send(result, failure)
}

// claimReport makes the caller the one that reports the attempt.
func (a *attempt) claimReport() bool { return a.reported.CompareAndSwap(false, true) }

// abort ends the attempt at once with failure, whatever the activity function
// is doing: its context is cancelled with the failure as the cause, and the
// failure is reported now rather than when the function returns or its lease
// runs out. What the function returns later is dropped. why is logged at
// ERROR. It reports false when the attempt was already reported.
func (a *attempt) abort(failure *durablev1.Failure, why string) bool {
	if !a.claimReport() {
		return false
	}
	a.logger().Error(why, "failure_type", failure.GetType(), "message", failure.GetMessage())
	a.cancel(activity.ErrorFromFailure(failure))
	// The attempt's own goroutine is still counted, so Add cannot race
	// Stop's Wait.
	a.w.attemptsWG.Add(1)
	go func() {
		defer a.w.attemptsWG.Done()
		a.send(nil, failure)
	}()
	return true
}

func (a *attempt) logger() *slog.Logger {
	return a.w.log.With("workflow_id", a.task.GetWorkflowId(), "activity_id", a.task.GetActivityId(),
		"activity_type", a.task.GetActivityType(), "attempt", a.task.GetAttempt())
}

// send reports an outcome. A payload over the daemon's bound is never
// dropped: it becomes a PayloadTooLarge failure, before sending when the task
// carried the bound, or when the daemon refuses the field. Unavailable is
// retried briefly; a stale lease is logged and dropped, as the daemon has
// moved on.
func (a *attempt) send(result []byte, failure *durablev1.Failure) {
	log := a.logger()
	tooLarge := func(replacement *durablev1.Failure) {
		log.Error("activity payload over the daemon's limit; the attempt fails as "+activity.TypePayloadTooLarge, "message", replacement.GetMessage())
		result, failure = nil, replacement
	}
	f := oversized(result, failure, a.task.GetMaxPayload())
	if f != nil {
		tooLarge(f)
	}
	err := a.sendOnce(result, failure)
	if f == nil {
		if f = refusedPayload(err, result, failure); f != nil {
			tooLarge(f)
			err = a.sendOnce(result, failure)
		}
	}
	switch status.Code(err) {
	case codes.OK:
	case codes.FailedPrecondition, codes.NotFound:
		log.Info("activity lease lost; report dropped", "err", err)
	default:
		log.Warn("report activity", "err", err)
	}
}

// sendOnce makes the report call, through restarts of the daemon.
func (a *attempt) sendOnce(result []byte, failure *durablev1.Failure) error {
	svc := a.w.c.Service()
	// Through the node the workflow's other calls go to (client.ForWorkflow).
	ctx, cancel := context.WithTimeout(client.ForWorkflow(context.Background(), a.task.GetWorkflowId()), 3*reportTimeout)
	defer cancel()
	return retryUnavailable(ctx, func(ctx context.Context) error {
		var err error
		if failure == nil {
			_, err = svc.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{
				TaskToken: a.task.GetTaskToken(), Identity: a.w.opts.Identity, Result: result})
		} else {
			_, err = svc.FailActivityTask(ctx, &durablev1.FailActivityRequest{
				TaskToken: a.task.GetTaskToken(), Identity: a.w.opts.Identity, Failure: failure})
		}
		return err
	})
}

// abandonRunning is Stop's last step: attempts still running are cancelled
// and reported failed with their last heartbeat saved, so they retry on
// another worker without waiting for their lease to run out.
func (w *Worker) abandonRunning() {
	w.runningMu.Lock()
	var left []*attempt
	for a := range w.running {
		left = append(left, a)
	}
	w.runningMu.Unlock()
	done := make(chan struct{}, len(left))
	for _, a := range left {
		go func() {
			a.cancel(ErrWorkerShutdown)
			a.hb.flush()
			a.report(nil, activity.FailureFromError(activity.NewError(activity.TypeWorkerShutdown,
				fmt.Sprintf("worker %s stopped before the attempt finished", w.opts.Identity))))
			done <- struct{}{}
		}()
	}
	for range left {
		<-done
	}
}
