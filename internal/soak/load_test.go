package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// load starts workflows and plays the operator, against a daemon that comes
// and goes: every call that fails because it is away is made again.
type load struct {
	c      *client.Client
	ledger *ledger
	gates  *gates
	seed   uint64

	next    atomic.Int64 // workflow sequence
	reasons atomic.Int64 // single redrive sequence

	mu         sync.Mutex
	unexpected []problem // errors no restart explains
}

// transient says whether err is what a call gets while the daemon restarts.
func transient(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

func (l *load) refused(what string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unexpected = append(l.unexpected, problem{kind: refused, check: "unexpected error", subject: what, want: "OK, or Unavailable while the daemon restarts", got: err.Error()})
}

// starter starts workflows one after another, each once the previous one
// closed, until more ends. Every start it begins is seen through, on run:
// the check must know whether each workflow exists.
func (l *load) starter(more, run context.Context, n int) {
	r := rand.New(rand.NewPCG(l.seed, uint64(n)))
	for more.Err() == nil {
		id := fmt.Sprintf("soak-%05d", l.next.Add(1))
		if !l.start(run, id, randomFlow(r)) {
			return
		}
		l.waitClosed(more, id)
	}
}

// start makes StartWorkflow until it is acknowledged or refused as a
// duplicate (an earlier call landed, its answer lost in a restart).
func (l *load) start(ctx context.Context, id string, in FlowInput) bool {
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := l.c.Start(cctx, flowName, in, client.StartOptions{ID: id, TaskQueue: taskQueue})
		cancel()
		switch {
		case err == nil:
			l.ledger.started(id, true)
			return true
		case status.Code(err) == codes.AlreadyExists:
			l.ledger.started(id, false)
			return true
		case ctx.Err() != nil:
			return false
		case transient(err):
			l.ledger.failed("StartWorkflow", err)
			pause(ctx, 20*time.Millisecond)
		default:
			l.refused("StartWorkflow "+id, err)
			return false
		}
	}
}

// waitClosed long-polls the workflow until it closes or ctx ends.
func (l *load) waitClosed(ctx context.Context, id string) {
	for ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := l.c.Service().DescribeWorkflow(cctx, &durablev1.DescribeWorkflowRequest{WorkflowId: id, WaitForClose: true})
		cancel()
		if err == nil && d.GetWorkflow().GetStatus() != durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING {
			return
		}
		if err != nil && !transient(err) {
			l.refused("DescribeWorkflow "+id, err)
			return
		}
		pause(ctx, 20*time.Millisecond)
	}
}

// operator finds dead letters, "fixes" their downstream (opens their gates)
// and redrives them, by turns one at a time, as an operation over a list,
// and as an operation over a filter, until ctx ends. every spaces the
// rounds.
func (l *load) operator(ctx context.Context, every func() time.Duration) {
	for round := 0; ; round++ {
		if pause(ctx, every()) != nil {
			return
		}
		letters, err := l.c.ListDeadLetters(ctx, client.DeadLetterFilter{})
		if err != nil {
			if !transient(err) {
				l.refused("ListDeadLetters", err)
			}
			continue
		}
		if len(letters) == 0 {
			continue
		}
		for _, a := range letters {
			l.gates.openKey(a.GetIdempotencyKey())
		}
		switch round % 3 {
		case 0:
			for i, a := range letters {
				l.redriveOne(ctx, a, i%4 == 0)
			}
		case 1:
			refs := make([]*durablev1.ActivityRef, len(letters))
			for i, a := range letters {
				refs[i] = &durablev1.ActivityRef{WorkflowId: a.GetWorkflowId(), ActivityId: a.GetActivityId()}
			}
			l.operation(ctx, func(ctx context.Context) (*durablev1.Operation, error) {
				return l.c.RedriveList(ctx, refs, client.WithRate(20), client.WithReason("soak: a list"))
			})
		default:
			l.operation(ctx, func(ctx context.Context) (*durablev1.Operation, error) {
				return l.c.RedriveAll(ctx, client.DeadLetterFilter{}, client.WithRate(50), client.WithReason("soak: every letter"))
			})
		}
	}
}

// redriveOne redrives one letter with a reason unique in the run (and, if
// edit, one more attempt allowed), so the check can find its event.
func (l *load) redriveOne(ctx context.Context, a *durablev1.PendingActivity, edit bool) {
	reason := fmt.Sprintf("soak: r%d", l.reasons.Add(1))
	opts := []client.RedriveOption{client.WithReason(reason)}
	if edit {
		opts = append(opts, client.WithEdit(&durablev1.OptionsPatch{MaxAttempts: proto.Int32(a.GetMaxAttempts() + 1)}))
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := l.c.Redrive(cctx, a.GetWorkflowId(), a.GetActivityId(), opts...)
	switch c := status.Code(err); {
	case err == nil:
		l.ledger.redriven(a.GetWorkflowId(), a.GetActivityId(), reason)
	case c == codes.FailedPrecondition || c == codes.NotFound:
		// An operation got to it first.
	case transient(err):
		l.ledger.failed("RedriveDeadLetter", err)
	default:
		l.refused("RedriveDeadLetter "+a.GetIdempotencyKey(), err)
	}
}

func (l *load) operation(ctx context.Context, start func(context.Context) (*durablev1.Operation, error)) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	op, err := start(cctx)
	switch c := status.Code(err); {
	case err == nil:
		l.ledger.operation(op.GetId(), op.GetMatched())
	case c == codes.FailedPrecondition || c == codes.NotFound:
		// Every listed letter was redriven meanwhile.
	case transient(err):
		l.ledger.failed("RedriveDeadLetters", err)
	default:
		l.refused("RedriveDeadLetters", err)
	}
}
