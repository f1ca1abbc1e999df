package worker

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/workflow"
)

// reportTimeout bounds one report call; reports do not use the poll context
// so that they still go out during a stop.
const reportTimeout = 10 * time.Second

// runWorkflowTask replays the task's history and completes the task with the
// new commands, or fails it (panic, non-determinism, unknown type) so that the
// daemon retries it, possibly on a fixed worker. Commands the daemon refuses
// fail the task for good, which fails the workflow.
func (w *Worker) runWorkflowTask(t *durablev1.PollWorkflowTaskResponse) {
	log := w.log.With("workflow_id", t.GetWorkflowId(), "workflow_type", t.GetWorkflowType(), "attempt", t.GetAttempt())
	w.mu.Lock()
	def := w.workflows[t.GetWorkflowType()]
	w.mu.Unlock()

	var res workflow.TaskResult
	if def == nil {
		res.Failure = activity.FailureFromError(activity.NewError(activity.TypeWorkflowNotRegistered,
			"workflow type "+t.GetWorkflowType()+" is not registered on worker "+w.opts.Identity))
	} else {
		var queue string
		if h := t.GetHistory(); len(h) > 0 {
			queue = h[0].GetTaskQueue()
		}
		res = def.Execute(workflow.TaskParams{
			WorkflowID:   t.GetWorkflowId(),
			WorkflowType: t.GetWorkflowType(),
			TaskQueue:    queue,
			Attempt:      int(t.GetAttempt()),
			History:      t.GetHistory(),
			Converter:    w.c.Converter(),
		})
	}

	if res.Failure != nil {
		log.Warn("workflow task failed", "failure_type", res.Failure.GetType(), "message", res.Failure.GetMessage())
		w.failWorkflowTask(log, t, res.Failure)
		return
	}
	err := w.reportWorkflowTask(func(ctx context.Context) error {
		_, err := w.c.Service().CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{
			TaskToken: t.GetTaskToken(), Identity: w.opts.Identity, Commands: res.Commands,
		})
		return err
	})
	if field, reason, ok := refusedField(err); ok && isCommandsField(field) {
		// The same code would send the same commands on every retry: fail
		// the task non-retryably, which fails the workflow with the reason,
		// instead of letting it time out and come back forever.
		f := commandsRefused(res.Commands, field, reason)
		log.Error("the daemon refused the workflow task's commands; the workflow fails", "failure_type", f.GetType(), "message", f.GetMessage())
		w.failWorkflowTask(log, t, f)
		return
	}
	if err != nil {
		// The lease ends on its own; the daemon hands the task out again.
		log.Warn("report workflow task", "err", err)
	}
}

// failWorkflowTask reports a failed workflow task. A failure the daemon
// refuses for its size (a panic's stack over the payload bound) is sent
// again without its details, so that the reason still reaches history.
func (w *Worker) failWorkflowTask(log *slog.Logger, t *durablev1.PollWorkflowTaskResponse, f *durablev1.Failure) {
	send := func(f *durablev1.Failure) error {
		return w.reportWorkflowTask(func(ctx context.Context) error {
			_, err := w.c.Service().FailWorkflowTask(ctx, &durablev1.FailWorkflowTaskRequest{
				TaskToken: t.GetTaskToken(), Identity: w.opts.Identity, Failure: f,
			})
			return err
		})
	}
	err := send(f)
	if field, _, ok := refusedField(err); ok && strings.HasPrefix(field, "failure.") {
		err = send(trimFailure(f))
	}
	if err != nil {
		// The lease ends on its own; the daemon hands the task out again.
		log.Warn("report workflow task failure", "err", err)
	}
}

// reportWorkflowTask makes a report call. A daemon that restarts mid-report
// keeps the lease it had on disk, so the report is retried through the
// restart rather than left to the task's timeout; a report that did land
// comes back FailedPrecondition.
func (w *Worker) reportWorkflowTask(call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*reportTimeout)
	defer cancel()
	return retryUnavailable(ctx, call)
}

// retryUnavailable makes a report call, and makes it again after a backoff
// while the daemon is unavailable (restarting), until it answers or ctx ends.
func retryUnavailable(ctx context.Context, call func(context.Context) error) error {
	var bo backoff
	for {
		err := call(ctx)
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return err
		}
		bo.wait(ctx)
	}
}
