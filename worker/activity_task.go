package worker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/activity"
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
	go func() {
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
	}()
}

func (a *attempt) run() {
	a.w.mu.Lock()
	def := a.w.activities[a.task.GetActivityType()]
	a.w.mu.Unlock()
	if def == nil {
		a.report(nil, &durablev1.Failure{Type: "ActivityNotRegistered",
			Message: fmt.Sprintf("activity type %s is not registered on worker %s", a.task.GetActivityType(), a.w.opts.Identity)})
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
			result, failure = nil, &durablev1.Failure{Type: "Panic", Message: fmt.Sprint(r), Details: debug.Stack()}
		}
	}()
	conv := a.w.c.Converter()
	args := []reflect.Value{reflect.ValueOf(a.ctx)}
	if def.in != nil {
		v := reflect.New(def.in)
		if err := conv.FromPayload(a.task.GetInput(), v.Interface()); err != nil {
			return nil, &durablev1.Failure{Type: "BadInput", Message: err.Error(), NonRetryable: true}
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
		return nil, &durablev1.Failure{Type: "BadResult", Message: err.Error(), NonRetryable: true}
	}
	return b, nil
}

// failureOf maps an activity's error to the Failure the daemon decides on:
// an *activity.Error anywhere in the chain keeps its type and flag; a context
// deadline (or a lease that ran out) is a Timeout; anything else is a
// retryable "Error".
func failureOf(err error, ctx context.Context) *durablev1.Failure {
	var ae *activity.Error
	if errors.As(err, &ae) {
		msg := ae.Message
		if msg == "" {
			msg = err.Error()
		}
		return &durablev1.Failure{Type: ae.Type, Message: msg, NonRetryable: ae.NoRetry}
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled) && errors.Is(cause, context.DeadlineExceeded):
		return &durablev1.Failure{Type: "Timeout", Message: err.Error()}
	case errors.Is(err, context.Canceled) && errors.Is(cause, ErrWorkerShutdown):
		return &durablev1.Failure{Type: "WorkerShutdown", Message: err.Error()}
	}
	return &durablev1.Failure{Type: "Error", Message: err.Error()}
}

// report sends the attempt's outcome once; a later call (the attempt
// finishing after Stop gave up on it) does nothing. Unavailable is retried
// briefly; a stale lease is logged and dropped, as the daemon has moved on.
func (a *attempt) report(result []byte, failure *durablev1.Failure) {
	if !a.reported.CompareAndSwap(false, true) {
		return
	}
	log := a.w.log.With("workflow_id", a.task.GetWorkflowId(), "activity_id", a.task.GetActivityId(),
		"activity_type", a.task.GetActivityType(), "attempt", a.task.GetAttempt())
	svc := a.w.c.Service()
	ctx, cancel := context.WithTimeout(context.Background(), 3*reportTimeout)
	defer cancel()
	err := retryUnavailable(ctx, func(ctx context.Context) error {
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
	switch status.Code(err) {
	case codes.OK:
	case codes.FailedPrecondition, codes.NotFound:
		log.Info("activity lease lost; report dropped", "err", err)
	default:
		log.Warn("report activity", "err", err)
	}
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
			a.report(nil, &durablev1.Failure{Type: "WorkerShutdown",
				Message: fmt.Sprintf("worker %s stopped before the attempt finished", w.opts.Identity)})
			done <- struct{}{}
		}()
	}
	for range left {
		<-done
	}
}
