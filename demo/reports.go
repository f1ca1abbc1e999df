package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"

	"github.com/tinyllm/durable/demo/harness"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// reportLog writes a line for every activity report the daemon
// acknowledged, so the kill loop can check afterwards that none of them was
// lost: an attempt whose completion or failure a node acknowledged must end
// that way in the workflow's record, whichever node died after saying yes.
// It is a gRPC interceptor: it learns each attempt from the poll that leased
// it and writes the line once the report's call returned without error.
type reportLog struct {
	w io.Writer

	mu     sync.Mutex
	leased map[string]harness.Ack // by task token
}

func newReportLog(w io.Writer) *reportLog {
	return &reportLog{w: w, leased: map[string]harness.Ack{}}
}

func (l *reportLog) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err != nil {
		return err
	}
	switch r := req.(type) {
	case *durablev1.PollActivityTaskRequest:
		l.mu.Lock()
		for _, t := range reply.(*durablev1.PollActivityTaskResponse).GetTasks() {
			l.leased[string(t.GetTaskToken())] = harness.Ack{
				WorkflowID: t.GetWorkflowId(), ActivityID: t.GetActivityId(), Attempt: t.GetAttempt(),
			}
		}
		l.mu.Unlock()
	case *durablev1.CompleteActivityTaskRequest:
		l.acknowledged(r.GetTaskToken(), "")
	case *durablev1.FailActivityRequest:
		l.acknowledged(r.GetTaskToken(), r.GetFailure().GetType())
	}
	return nil
}

// acknowledged writes the line of the attempt leased under token.
func (l *reportLog) acknowledged(token []byte, failureType string) {
	l.mu.Lock()
	a, ok := l.leased[string(token)]
	delete(l.leased, string(token))
	l.mu.Unlock()
	if !ok {
		return
	}
	a.Completed, a.FailureType = failureType == "", failureType
	b, err := json.Marshal(a)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%s%s\n", harness.AckPrefix, b)
}
