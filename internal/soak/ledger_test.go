package soak

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// ledger is what the daemon acknowledged: every call it answered with OK
// that changed something, as the callers saw it. The workers' calls reach it
// through intercept, a gRPC client interceptor on their connections, so the
// SDK runs unchanged; the starters and the operator record their own calls.
// At the end every entry is looked for in the recovered state.
type ledger struct {
	mu sync.Mutex

	// Leases handed out, by task token, until their report is answered.
	activityLeases map[string]lease
	workflowLeases map[string]string // token -> workflow id

	starts      map[string]bool // workflow id -> acknowledged (false: found to exist on a retry)
	wfTasks     []wfTaskAck
	completions []completionAck
	failures    []failureAck
	redrives    []redriveAck
	operations  []operationAck

	// heartbeats holds, per idempotency key, the most progress an
	// acknowledged heartbeat carried; a lease handed out later must carry at
	// least as much (checked as it is recorded).
	heartbeats     map[string]int
	heartbeatAcks  int
	wfTaskFailures int // acknowledged FailWorkflowTask: the SDK could not run a workflow task
	checkpoints    int // leases checked against an acknowledged heartbeat
	lostCheckpoint []problem

	// errors counts the calls the daemon did not acknowledge, by method and
	// code: Unavailable while it restarts, FailedPrecondition for a report
	// whose lease had moved on.
	errors map[string]int
}

type lease struct {
	workflowID, activityID, activityType string
	attempt, maxAttempts                 int32
}

func (l lease) key() string { return l.workflowID + "/" + l.activityID }

type wfTaskAck struct {
	workflowID string
	scheduled  []string // activity ids
	timers     []string
	closed     durablev1.CommandType // COMPLETE_WORKFLOW, FAIL_WORKFLOW or unspecified
}

type completionAck struct {
	lease
	identity string
}

type failureAck struct {
	lease
	failure *durablev1.Failure
}

type redriveAck struct {
	workflowID, activityID, reason string
}

type operationAck struct {
	id      string
	matched int64
}

func newLedger() *ledger {
	return &ledger{
		activityLeases: map[string]lease{}, workflowLeases: map[string]string{},
		starts: map[string]bool{}, heartbeats: map[string]int{}, errors: map[string]int{},
	}
}

// intercept records the workers' acknowledged calls.
func (l *ledger) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errors[methodName(method)+" "+status.Code(err).String()]++
		if c := status.Code(err); c == codes.FailedPrecondition || c == codes.NotFound {
			l.forget(req)
		}
		return err
	}
	switch method {
	case durablev1.Durable_PollActivityTask_FullMethodName:
		for _, t := range reply.(*durablev1.PollActivityTaskResponse).GetTasks() {
			ls := lease{workflowID: t.GetWorkflowId(), activityID: t.GetActivityId(), activityType: t.GetActivityType(),
				attempt: t.GetAttempt(), maxAttempts: t.GetMaxAttempts()}
			l.activityLeases[string(t.GetTaskToken())] = ls
			l.checkCheckpoint(ls, t.GetHeartbeatDetails())
		}
	case durablev1.Durable_PollWorkflowTask_FullMethodName:
		if r := reply.(*durablev1.PollWorkflowTaskResponse); len(r.GetTaskToken()) > 0 {
			l.workflowLeases[string(r.GetTaskToken())] = r.GetWorkflowId()
		}
	case durablev1.Durable_CompleteWorkflowTask_FullMethodName:
		r := req.(*durablev1.CompleteWorkflowTaskRequest)
		ack := wfTaskAck{workflowID: l.workflowLeases[string(r.GetTaskToken())]}
		delete(l.workflowLeases, string(r.GetTaskToken()))
		for _, c := range r.GetCommands() {
			switch c.GetType() {
			case durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY:
				ack.scheduled = append(ack.scheduled, c.GetActivityId())
			case durablev1.CommandType_COMMAND_TYPE_START_TIMER:
				ack.timers = append(ack.timers, c.GetTimerId())
			case durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW, durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW:
				ack.closed = c.GetType()
			}
		}
		l.wfTasks = append(l.wfTasks, ack)
	case durablev1.Durable_FailWorkflowTask_FullMethodName:
		delete(l.workflowLeases, string(req.(*durablev1.FailWorkflowTaskRequest).GetTaskToken()))
		l.wfTaskFailures++
	case durablev1.Durable_CompleteActivityTask_FullMethodName:
		r := req.(*durablev1.CompleteActivityTaskRequest)
		if ls, ok := l.activityLeases[string(r.GetTaskToken())]; ok {
			l.completions = append(l.completions, completionAck{lease: ls, identity: r.GetIdentity()})
		}
		delete(l.activityLeases, string(r.GetTaskToken()))
	case durablev1.Durable_FailActivityTask_FullMethodName:
		r := req.(*durablev1.FailActivityRequest)
		if ls, ok := l.activityLeases[string(r.GetTaskToken())]; ok {
			l.failures = append(l.failures, failureAck{lease: ls, failure: r.GetFailure()})
		}
		delete(l.activityLeases, string(r.GetTaskToken()))
	case durablev1.Durable_RecordHeartbeat_FullMethodName:
		r := req.(*durablev1.HeartbeatRequest)
		if ls, ok := l.activityLeases[string(r.GetTaskToken())]; ok {
			l.heartbeatAcks++
			if n, err := strconv.Atoi(string(r.GetDetails())); err == nil && n > l.heartbeats[ls.key()] {
				l.heartbeats[ls.key()] = n
			}
		}
	}
	return nil
}

// checkCheckpoint: a lease must carry the progress of every heartbeat
// acknowledged before it was handed out. The heartbeat's commit precedes its
// answer, which precedes this record; the lease it extended had to end before
// this one could be handed out.
func (l *ledger) checkCheckpoint(ls lease, details []byte) {
	acked, ok := l.heartbeats[ls.key()]
	if !ok {
		return
	}
	l.checkpoints++
	got, err := strconv.Atoi(string(details))
	if err != nil {
		got = 0
	}
	if got < acked {
		l.lostCheckpoint = append(l.lostCheckpoint, problem{
			kind: lost, check: "heartbeat checkpoint", subject: ls.key(),
			want: fmt.Sprintf("attempt %d resumes from at least %d chunks (an acknowledged heartbeat said so)", ls.attempt, acked),
			got:  fmt.Sprintf("details %q", details),
		})
	}
}

// forget drops the lease of a report the daemon refused for good.
func (l *ledger) forget(req any) {
	switch r := req.(type) {
	case *durablev1.CompleteActivityTaskRequest:
		delete(l.activityLeases, string(r.GetTaskToken()))
	case *durablev1.FailActivityRequest:
		delete(l.activityLeases, string(r.GetTaskToken()))
	case *durablev1.CompleteWorkflowTaskRequest:
		delete(l.workflowLeases, string(r.GetTaskToken()))
	case *durablev1.FailWorkflowTaskRequest:
		delete(l.workflowLeases, string(r.GetTaskToken()))
	}
}

func (l *ledger) started(id string, acknowledged bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts[id] = l.starts[id] || acknowledged
}

func (l *ledger) redriven(workflowID, activityID, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.redrives = append(l.redrives, redriveAck{workflowID, activityID, reason})
}

func (l *ledger) operation(id string, matched int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.operations = append(l.operations, operationAck{id, matched})
}

func (l *ledger) failed(method string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errors[method+" "+status.Code(err).String()]++
}

// workflowIDs lists every workflow known to exist.
func (l *ledger) workflowIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.starts))
	for id := range l.starts {
		ids = append(ids, id)
	}
	return ids
}

func methodName(full string) string {
	for i := len(full) - 1; i >= 0; i-- {
		if full[i] == '/' {
			return full[i+1:]
		}
	}
	return full
}
