package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/activity"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/workflow"
)

// reportTimeout bounds one report call; reports do not use the poll context
// so that they still go out during a stop.
const reportTimeout = 10 * time.Second

// runWorkflowTask runs the task's workflow code, on the workflow's cached
// execution when the task carries only new events, and completes the task
// with the new commands, or fails it (panic, non-determinism, unknown type)
// so that the daemon retries it, possibly on a fixed worker. Commands the
// daemon refuses fail the task for good, which fails the workflow. The
// execution is kept for the next task only when the daemon accepted this
// one's commands and the workflow goes on.
func (w *Worker) runWorkflowTask(t *durablev1.PollWorkflowTaskResponse) {
	log := w.log.With("workflow_id", t.GetWorkflowId(), "workflow_type", t.GetWorkflowType(), "attempt", t.GetAttempt())
	w.mu.Lock()
	def := w.workflows[t.GetWorkflowType()]
	w.mu.Unlock()

	var x *workflow.Execution
	keep := false
	if w.cache != nil {
		id := t.GetWorkflowId()
		x = w.cache.take(id)
		defer func() {
			if keep {
				w.cache.put(id, x)
				return
			}
			if x != nil {
				x.Close()
			}
			w.cache.drop(id)
		}()
	}

	var res workflow.TaskResult
	if def == nil {
		res.Failure = activity.FailureFromError(activity.NewError(activity.TypeWorkflowNotRegistered,
			"workflow type "+t.GetWorkflowType()+" is not registered on worker "+w.opts.Identity))
	} else {
		var err error
		if x, res, err = w.execute(def, t, x); err != nil {
			// The lease ends on its own; the daemon hands the task out again,
			// with the whole history.
			log.Warn("read the workflow's history", "err", err)
			return
		}
	}

	if res.Failure != nil {
		log.Warn("workflow task failed", "failure_type", res.Failure.GetType(), "message", res.Failure.GetMessage())
		w.failWorkflowTask(log, t, res.Failure)
		return
	}
	err := w.reportWorkflowTask(t.GetWorkflowId(), func(ctx context.Context) error {
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
		return
	}
	keep = x != nil && x.Reusable()
}

// execute runs the task: on cached, the workflow's execution from its
// previous task, when the task carries only the events after that one;
// otherwise from the whole history, asking the daemon for the start of it
// when the task carries only the end. It returns the execution to keep.
func (w *Worker) execute(def *workflow.Definition, t *durablev1.PollWorkflowTaskResponse, cached *workflow.Execution) (*workflow.Execution, workflow.TaskResult, error) {
	p := workflow.TaskParams{
		WorkflowID:   t.GetWorkflowId(),
		WorkflowType: t.GetWorkflowType(),
		Attempt:      int(t.GetAttempt()),
		History:      t.GetHistory(),
		Converter:    w.c.Converter(),
	}
	from := t.GetHistoryStartEventId()
	if cached != nil {
		if from > 1 {
			res, err := cached.Continue(p)
			if err == nil {
				return cached, res, nil
			}
		}
		// The whole history came (another worker ran a task since, or the
		// daemon restarted), or not the events after the cached ones.
		cached.Close()
	}
	if from > 1 {
		head, err := w.historyBefore(t, from)
		if err != nil {
			return nil, workflow.TaskResult{}, err
		}
		p.History = append(head, p.History...)
	}
	if len(p.History) > 0 {
		p.TaskQueue = p.History[0].GetTaskQueue()
	}
	x, res := def.Start(p)
	return x, res, nil
}

// historyBefore asks the daemon for the events before from of the task's
// workflow: a task that carries only new events, for a workflow this worker
// does not have (evicted, or its last task's report went astray).
func (w *Worker) historyBefore(t *durablev1.PollWorkflowTaskResponse, from int64) ([]*durablev1.HistoryEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*reportTimeout)
	defer cancel()
	var head []*durablev1.HistoryEvent
	err := retryUnavailable(ctx, func(ctx context.Context) error {
		resp, err := w.c.Service().GetWorkflowTaskHistory(ctx, &durablev1.GetWorkflowTaskHistoryRequest{TaskToken: t.GetTaskToken(), BeforeEventId: from})
		head = resp.GetEvents()
		return err
	})
	if err != nil {
		return nil, err
	}
	if n := len(head); n == 0 || head[0].GetEventId() != 1 || head[n-1].GetEventId() != from-1 || int64(n) != from-1 {
		return nil, fmt.Errorf("the daemon sent %d events for the history before event %d, not events 1 to %d", n, from, from-1)
	}
	return head, nil
}

// failWorkflowTask reports a failed workflow task. A failure the daemon
// refuses for its size (a panic's stack over the payload bound) is sent
// again without its details, so that the reason still reaches history.
func (w *Worker) failWorkflowTask(log *slog.Logger, t *durablev1.PollWorkflowTaskResponse, f *durablev1.Failure) {
	send := func(f *durablev1.Failure) error {
		return w.reportWorkflowTask(t.GetWorkflowId(), func(ctx context.Context) error {
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
func (w *Worker) reportWorkflowTask(workflowID string, call func(context.Context) error) error {
	// Through the node the workflow's other calls go to (client.ForWorkflow).
	ctx, cancel := context.WithTimeout(client.ForWorkflow(context.Background(), workflowID), 3*reportTimeout)
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
