package worker

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/workflow"
)

// reportTimeout bounds one report call; reports do not use the poll context
// so that they still go out during a stop.
const reportTimeout = 10 * time.Second

// runWorkflowTask replays the task's history and completes the task with the
// new commands, or fails it (panic, non-determinism, unknown type) so that the
// daemon retries it, possibly on a fixed worker.
func (w *Worker) runWorkflowTask(t *durablev1.PollWorkflowTaskResponse) {
	log := w.log.With("workflow_id", t.GetWorkflowId(), "workflow_type", t.GetWorkflowType(), "attempt", t.GetAttempt())
	w.mu.Lock()
	def := w.workflows[t.GetWorkflowType()]
	w.mu.Unlock()

	var res workflow.TaskResult
	if def == nil {
		res.Failure = &durablev1.Failure{Type: "WorkflowNotRegistered",
			Message: "workflow type " + t.GetWorkflowType() + " is not registered on worker " + w.opts.Identity}
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

	// A daemon that restarts mid-report keeps the lease it had on disk, so
	// the report is retried through the restart rather than left to the
	// task's timeout; a report that did land comes back FailedPrecondition.
	ctx, cancel := context.WithTimeout(context.Background(), 3*reportTimeout)
	defer cancel()
	if res.Failure != nil {
		log.Warn("workflow task failed", "failure_type", res.Failure.GetType(), "message", res.Failure.GetMessage())
	}
	err := retryUnavailable(ctx, func(ctx context.Context) error {
		var err error
		if res.Failure != nil {
			_, err = w.c.Service().FailWorkflowTask(ctx, &durablev1.FailWorkflowTaskRequest{
				TaskToken: t.GetTaskToken(), Identity: w.opts.Identity, Failure: res.Failure,
			})
		} else {
			_, err = w.c.Service().CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{
				TaskToken: t.GetTaskToken(), Identity: w.opts.Identity, Commands: res.Commands,
			})
		}
		return err
	})
	if err != nil {
		// The lease ends on its own; the daemon hands the task out again.
		log.Warn("report workflow task", "err", err)
	}
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
