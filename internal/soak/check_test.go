package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tinyllm/durable/client"
	"github.com/tinyllm/durable/demo/sink"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// checker compares the ledger with the recovered state.
type checker struct {
	c         *client.Client
	ledger    *ledger
	sink      *sink.Store
	workflows map[string]*recovered
	problems  []problem
	tally     tally
}

// tally is what the recovered state holds, for the figures.
type tally struct {
	workflows, completed, failed       int
	activities, deadLettered, redriven int
	effects, deliveries                int
	operations, released, timersFired  int
}

func (k *checker) add(kind, check, subject, want, got string) {
	k.problems = append(k.problems, problem{kind: kind, check: check, subject: subject, want: want, got: got})
}

// call makes a read, again while the daemon answers Unavailable.
func call[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		v, err := fn(cctx)
		cancel()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return v, err
		}
		pause(ctx, 100*time.Millisecond)
	}
}

// check reads every workflow the run started and runs every rule.
func (k *checker) check(ctx context.Context) {
	k.workflows = map[string]*recovered{}
	ids := k.ledger.workflowIDs()
	slices.Sort(ids)
	for _, id := range ids {
		d, err := call(ctx, func(ctx context.Context) (*durablev1.DescribeWorkflowResponse, error) { return k.c.Describe(ctx, id) })
		if status.Code(err) == codes.NotFound {
			how := "acknowledged"
			if !k.ledger.starts[id] {
				how = "refused as already existing on a retry"
			}
			k.add(lost, "StartWorkflow", id, "the workflow exists (its start was "+how+")", "NotFound")
			continue
		}
		if err != nil {
			k.add(refused, "DescribeWorkflow", id, "an answer", err.Error())
			continue
		}
		hist, err := call(ctx, func(ctx context.Context) ([]*durablev1.HistoryEvent, error) { return k.c.History(ctx, id) })
		if err != nil {
			k.add(refused, "GetWorkflowHistory", id, "an answer", err.Error())
			continue
		}
		k.workflows[id] = newRecovered(d, hist)
	}
	k.checkUnknownWorkflows(ctx)
	for _, id := range ids {
		if w := k.workflows[id]; w != nil {
			k.checkHistory(id, w)
		}
	}
	k.checkWorkflowTasks()
	k.checkCompletions()
	k.checkFailures()
	k.checkRedrives()
	k.checkOperations(ctx)
	k.checkEffects()
	k.problems = append(k.problems, k.ledger.lostCheckpoint...)
}

// checkUnknownWorkflows: the daemon holds no workflow the run did not start.
func (k *checker) checkUnknownWorkflows(ctx context.Context) {
	all, err := call(ctx, func(ctx context.Context) ([]*durablev1.WorkflowInfo, error) {
		return k.c.ListWorkflows(ctx, durablev1.WorkflowStatus_WORKFLOW_STATUS_UNSPECIFIED)
	})
	if err != nil {
		k.add(refused, "ListWorkflows", "", "an answer", err.Error())
		return
	}
	for _, w := range all {
		if _, ok := k.ledger.starts[w.GetWorkflowId()]; !ok {
			k.add(twice, "workflows", w.GetWorkflowId(), "only workflows the run started", "a workflow nobody started")
		}
	}
}

// checkHistory: one start, one close at the end, each activity scheduled
// once and ended at most once, each timer fired at most once; a closed
// workflow has nothing pending; a failed one failed the way the workload
// fails.
func (k *checker) checkHistory(id string, w *recovered) {
	k.tally.workflows++
	h := w.history
	if len(h) == 0 || h[0].GetType() != evStarted {
		k.add(lost, "history", id, "WorkflowExecutionStarted first", fmt.Sprintf("%d events, first %v", len(h), firstType(h)))
	}
	counts := map[string]int{}
	for _, e := range h {
		if e.GetType() == evScheduled {
			counts[e.GetActivityId()]++
		}
	}
	for act, n := range counts {
		if n > 1 {
			k.add(twice, "ActivityTaskScheduled", id+"/"+act, "scheduled once", fmt.Sprintf("scheduled %d times", n))
		}
	}
	for act, ends := range w.ends {
		if len(ends) > 1 {
			k.add(twice, "activity end", id+"/"+act, "one ActivityTaskCompleted or ActivityTaskFailed", eventList(ends))
		}
		if w.scheduled[act] == nil {
			k.add(lost, "ActivityTaskScheduled", id+"/"+act, "scheduled before it ended", "no ActivityTaskScheduled")
		}
	}
	for timer, n := range w.fired {
		if n > 1 || w.timers[timer] == 0 {
			k.add(twice, "TimerFired", id+" timer "+timer, "started once, fired once", fmt.Sprintf("started %d, fired %d", w.timers[timer], n))
		}
	}
	k.tally.activities += len(w.scheduled)
	for _, d := range w.dead {
		k.tally.deadLettered += len(d)
	}
	for _, r := range w.redriven {
		k.tally.redriven += len(r)
	}
	for _, n := range w.fired {
		k.tally.timersFired += n
	}
	switch st := w.info.GetStatus(); {
	case len(w.closes) > 1:
		k.add(twice, "workflow close", id, "one WorkflowExecutionCompleted or Failed", eventList(w.closes))
	case st == statusRunning:
		k.add(stuck, "workflow", id, "completed or failed once the faults ended", "running: "+pendingSummary(w))
	case len(w.closes) == 0 || w.closes[0] != h[len(h)-1]:
		k.add(lost, "workflow close", id, fmt.Sprintf("%v and its close event last in history", st), fmt.Sprintf("last event %v", h[len(h)-1].GetType()))
	case st == statusCompleted:
		k.tally.completed++
		k.checkResult(id, w)
	case st == statusFailed:
		k.tally.failed++
		if f := w.info.GetFailure(); f.GetType() != failRejected {
			k.add(refused, "workflow failure", id, "failed only as the workload fails it ("+failRejected+")", fmt.Sprintf("%s: %s", f.GetType(), f.GetMessage()))
		}
	}
	if w.info.GetStatus() != statusRunning {
		for act, a := range w.activities {
			if _, finished := w.outcome[act]; !finished {
				k.add(stuck, "pending activity", id+"/"+act, "nothing pending in a closed workflow", a.GetState().String())
			}
		}
	}
}

// checkResult: a completed workflow's result names every step once.
func (k *checker) checkResult(id string, w *recovered) {
	var r FlowResult
	if err := json.Unmarshal(w.info.GetResult(), &r); err != nil {
		k.add(refused, "workflow result", id, "a FlowResult", err.Error())
		return
	}
	seen := map[int]int{}
	for _, i := range append(r.Done, r.Rejected...) {
		seen[i]++
	}
	for i := range len(w.scheduled) {
		if seen[i] != 1 {
			k.add(twice, "workflow result", id, fmt.Sprintf("step %d once in the result", i), fmt.Sprintf("%d times (%+v)", seen[i], r))
		}
	}
}

// checkWorkflowTasks: what an acknowledged workflow task decided is in history.
func (k *checker) checkWorkflowTasks() {
	for _, a := range k.ledger.wfTasks {
		w := k.workflows[a.workflowID]
		if w == nil {
			continue // reported as lost or refused already
		}
		for _, act := range a.scheduled {
			if w.scheduled[act] == nil {
				k.add(lost, "CompleteWorkflowTask", a.workflowID+"/"+act, "ActivityTaskScheduled (its workflow task was acknowledged)", "no such event")
			}
		}
		for _, timer := range a.timers {
			if w.timers[timer] == 0 {
				k.add(lost, "CompleteWorkflowTask", a.workflowID+" timer "+timer, "TimerStarted (its workflow task was acknowledged)", "no such event")
			}
		}
		if a.closed != durablev1.CommandType_COMMAND_TYPE_UNSPECIFIED && len(w.closes) == 0 {
			k.add(lost, "CompleteWorkflowTask", a.workflowID, fmt.Sprintf("the workflow closed (%v was acknowledged)", a.closed), w.info.GetStatus().String())
		}
	}
}

// checkCompletions: each acknowledged completion is the activity's one end,
// by the attempt and worker that reported it, and the daemon acknowledged
// only one per activity.
func (k *checker) checkCompletions() {
	acked := map[string]int{}
	for _, a := range k.ledger.completions {
		key := a.key()
		acked[key]++
		if acked[key] == 2 {
			k.add(twice, "CompleteActivityTask", key, "one acknowledged completion", "two or more")
		}
		w := k.workflows[a.workflowID]
		if w == nil {
			continue
		}
		ends := w.ends[a.activityID]
		if len(ends) == 0 || ends[0].GetType() != evActCompleted {
			k.add(lost, "CompleteActivityTask", key, fmt.Sprintf("ActivityTaskCompleted by attempt %d (acknowledged)", a.attempt), eventList(ends))
			continue
		}
		if s := w.started[a.activityID]; s.GetAttempt() != a.attempt || s.GetIdentity() != a.identity {
			k.add(lost, "CompleteActivityTask", key, fmt.Sprintf("attempt %d by %s (acknowledged)", a.attempt, a.identity),
				fmt.Sprintf("ActivityTaskStarted attempt %d by %s", s.GetAttempt(), s.GetIdentity()))
		}
	}
}

// checkFailures: each acknowledged failure is in the activity's attempt
// trail; one that ended the activity for good is its ActivityTaskFailed, and
// one by the last attempt its ActivityDeadLettered.
func (k *checker) checkFailures() {
	for _, a := range k.ledger.failures {
		w := k.workflows[a.workflowID]
		if w == nil {
			continue
		}
		key, msg := a.key(), a.failure.GetMessage()
		act := w.activities[a.activityID]
		if act == nil {
			k.add(lost, "FailActivityTask", key, "the activity, pending or finished", "not in describe")
			continue
		}
		found := slices.ContainsFunc(act.GetAttempts(), func(r *durablev1.AttemptRecord) bool {
			return r.GetAttempt() == a.attempt && r.GetFailure().GetMessage() == msg
		})
		if !found && act.GetAttemptsTruncated() == 0 {
			k.add(lost, "FailActivityTask", key, fmt.Sprintf("attempt %d failed with %q in the attempt trail (acknowledged)", a.attempt, msg), trail(act))
		}
		switch {
		case a.failure.GetNonRetryable():
			ends := w.ends[a.activityID]
			if len(ends) == 0 || ends[0].GetType() != evActFailed || ends[0].GetFailure().GetMessage() != msg {
				k.add(lost, "FailActivityTask", key, fmt.Sprintf("ActivityTaskFailed %q (a non-retryable failure was acknowledged)", msg), eventList(ends))
			}
		case a.attempt >= a.maxAttempts:
			if !slices.ContainsFunc(w.dead[a.activityID], func(e *durablev1.HistoryEvent) bool {
				return e.GetAttempt() == a.attempt && e.GetFailure().GetMessage() == msg
			}) {
				k.add(lost, "FailActivityTask", key, fmt.Sprintf("ActivityDeadLettered at attempt %d with %q (the last attempt's failure was acknowledged)", a.attempt, msg), eventList(w.dead[a.activityID]))
			}
		}
	}
}

// checkRedrives: each acknowledged single redrive is one ActivityRedriven
// event with its reason.
func (k *checker) checkRedrives() {
	for _, a := range k.ledger.redrives {
		w := k.workflows[a.workflowID]
		if w == nil {
			continue
		}
		n := 0
		for _, e := range w.redriven[a.activityID] {
			if e.GetReason() == a.reason {
				n++
			}
		}
		if n != 1 {
			k.add(map[bool]string{true: lost, false: twice}[n == 0], "RedriveDeadLetter", a.workflowID+"/"+a.activityID,
				fmt.Sprintf("one ActivityRedriven with reason %q (acknowledged)", a.reason), fmt.Sprintf("%d", n))
		}
	}
}

// checkOperations: each acknowledged operation completed, released each
// letter at most once, and its history events match its count.
func (k *checker) checkOperations(ctx context.Context) {
	byOp := map[string]map[string]int{}
	for id, w := range k.workflows {
		for act, evs := range w.redriven {
			for _, e := range evs {
				if op := e.GetOperationId(); op != "" {
					if byOp[op] == nil {
						byOp[op] = map[string]int{}
					}
					byOp[op][id+"/"+act]++
				}
			}
		}
	}
	for _, a := range k.ledger.operations {
		k.tally.operations++
		op, err := call(ctx, func(ctx context.Context) (*durablev1.Operation, error) { return k.c.DescribeOperation(ctx, a.id) })
		if err != nil {
			k.add(lost, "RedriveDeadLetters", a.id, "the operation (acknowledged)", err.Error())
			continue
		}
		k.tally.released += int(op.GetReleased())
		switch op.GetState() {
		case durablev1.OperationState_OPERATION_STATE_COMPLETED:
		case durablev1.OperationState_OPERATION_STATE_RUNNING:
			k.add(stuck, "operation", a.id, "completed once the faults ended", fmt.Sprintf("running, %d of %d released", op.GetReleased(), op.GetMatched()))
		default:
			k.add(refused, "operation", a.id, "completed (nobody cancels)", op.GetState().String())
		}
		if op.GetMatched() != a.matched || op.GetReleased()+op.GetSkipped()+op.GetLeft() != op.GetMatched() {
			k.add(lost, "operation counts", a.id, fmt.Sprintf("matched %d = released + skipped + left", a.matched),
				fmt.Sprintf("matched %d, released %d, skipped %d, left %d", op.GetMatched(), op.GetReleased(), op.GetSkipped(), op.GetLeft()))
		}
		total := 0
		for key, n := range byOp[a.id] {
			total += n
			if n > 1 {
				k.add(twice, "operation release", key, "released once by "+a.id, fmt.Sprintf("%d ActivityRedriven events", n))
			}
		}
		if int64(total) != op.GetReleased() {
			kind := lost
			if int64(total) > op.GetReleased() {
				kind = twice
			}
			k.add(kind, "operation release", a.id, fmt.Sprintf("%d ActivityRedriven events naming it (it released %d)", op.GetReleased(), op.GetReleased()), fmt.Sprint(total))
		}
	}
}

// checkEffects: every completed step's effect is in the sink; each step's
// effect was applied once; nothing else was applied.
func (k *checker) checkEffects() {
	counts := k.sink.Counts("")
	perStep := map[string]int{}
	for key, n := range counts {
		k.tally.effects++
		k.tally.deliveries += n
		wf, act, _ := strings.Cut(key, "/")
		w := k.workflows[wf]
		if w == nil || w.scheduled[act] == nil {
			k.add(lost, "effect", key, "an effect of a scheduled activity", "the sink applied it, the daemon has no such activity")
			continue
		}
		step := fmt.Sprintf("%s step %d", wf, w.steps[act].Index)
		perStep[step]++
		if perStep[step] == 2 {
			k.add(twice, "effect", step, "applied once", "applied under two or more activities")
		}
	}
	for id, w := range k.workflows {
		for act, ends := range w.ends {
			if len(ends) > 0 && ends[0].GetType() == evActCompleted && counts[id+"/"+act] == 0 {
				k.add(lost, "effect", id+"/"+act, "the effect of a completed activity in the sink", "never applied")
			}
		}
	}
}
