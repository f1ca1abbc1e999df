package faulttest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tinyllm/durable/internal/testdaemon"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const (
	opRunning   = durablev1.OperationState_OPERATION_STATE_RUNNING
	opCompleted = durablev1.OperationState_OPERATION_STATE_COMPLETED
	opCancelled = durablev1.OperationState_OPERATION_STATE_CANCELLED
	evRedriven  = durablev1.EventType_EVENT_TYPE_ACTIVITY_REDRIVEN
)

// connect returns a client of the daemon at addr, closed when the test ends.
func connect(t *testing.T, addr string) durablev1.DurableClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return durablev1.NewDurableClient(conn)
}

// letters dead-letters perWorkflow activities of type typ in each of the
// given workflows, on a queue of their own, and returns the workflow ids.
func letters(t *testing.T, c durablev1.DurableClient, prefix, typ string, workflows, perWorkflow int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	queue := prefix + "-q"
	var ids []string
	for w := range workflows {
		id := fmt.Sprintf("%s-%d", prefix, w)
		ids = append(ids, id)
		if _, err := c.StartWorkflow(ctx, &durablev1.StartWorkflowRequest{WorkflowId: id, WorkflowType: "Outage", TaskQueue: queue}); err != nil {
			t.Fatal(err)
		}
		wt, err := c.PollWorkflowTask(ctx, &durablev1.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "test"})
		if err != nil || wt.GetWorkflowId() != id {
			t.Fatalf("workflow task of %s: %v, %v", id, wt.GetWorkflowId(), err)
		}
		var cmds []*durablev1.Command
		for a := range perWorkflow {
			cmds = append(cmds, &durablev1.Command{
				Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: fmt.Sprint(a), ActivityType: typ,
				ActivityOptions: &durablev1.ActivityOptions{StartToCloseTimeout: durationpb.New(time.Minute), RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 1}},
			})
		}
		if _, err := c.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
			t.Fatal(err)
		}
	}
	// Fail them all, many at a time so that the daemon's group commit
	// shares its syncs among them.
	total := workflows * perWorkflow
	for failed := 0; failed < total; {
		r, err := c.PollActivityTask(ctx, &durablev1.PollActivityTaskRequest{TaskQueue: queue, Identity: "test", MaxTasks: 100})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, len(r.GetTasks()))
		for _, task := range r.GetTasks() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := c.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: &durablev1.Failure{Type: "Unavailable", Message: "down"}})
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		failed += len(r.GetTasks())
	}
	return ids
}

// waitOp polls an operation until cond holds, for up to a minute.
func waitOp(t *testing.T, c durablev1.DurableClient, id, what string, cond func(*durablev1.Operation) bool) *durablev1.Operation {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		op, err := c.DescribeOperation(context.Background(), &durablev1.DescribeOperationRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		if cond(op) {
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s never happened; last %v", id, what, op)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// redrivenEvents returns, per activity id of each workflow, the
// ActivityRedriven events in its history.
func redrivenEvents(t *testing.T, c durablev1.DurableClient, workflows []string) map[string][]*durablev1.HistoryEvent {
	t.Helper()
	out := map[string][]*durablev1.HistoryEvent{}
	for _, wf := range workflows {
		h, err := c.GetWorkflowHistory(context.Background(), &durablev1.GetWorkflowHistoryRequest{WorkflowId: wf})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range h.GetEvents() {
			if ev.GetType() == evRedriven {
				k := wf + "/" + ev.GetActivityId()
				out[k] = append(out[k], ev)
			}
		}
	}
	return out
}

func deadLetterCount(t *testing.T, c durablev1.DurableClient, typ string) int {
	t.Helper()
	r, err := c.ListDeadLetters(context.Background(), &durablev1.ListDeadLettersRequest{ActivityType: typ, PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(r.GetDeadLetters())
}

func auditRecord(t *testing.T, c durablev1.DurableClient, id int64) *durablev1.AuditRecord {
	t.Helper()
	r, err := c.ListAuditRecords(context.Background(), &durablev1.ListAuditRecordsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range r.GetRecords() {
		if rec.GetId() == id {
			return rec
		}
	}
	t.Fatalf("no audit record #%d", id)
	return nil
}

// TestRedriveOperationSurvivesRestart: a redrive operation of 300 letters
// at 50 per second, its daemon SIGKILLed half way; after the restart the
// operation goes on from where it stopped, paced from the restart, and
// finishes. Every letter was redriven exactly once (one ActivityRedriven
// event in its history, naming the operation), and the operation's counts,
// its audit record and the dead-letter queue agree.
func TestRedriveOperationSurvivesRestart(t *testing.T) {
	t.Parallel()
	d := testdaemon.Exec(t, t.TempDir())
	c := connect(t, d.Addr)
	wfs := letters(t, c, "restart", "Charge", 3, 100)
	if n := deadLetterCount(t, c, "Charge"); n != 300 {
		t.Fatalf("%d dead letters, want 300", n)
	}
	resp, err := c.RedriveDeadLetters(context.Background(), &durablev1.RedriveDeadLettersRequest{
		Filter: &durablev1.DeadLetterFilter{ActivityType: "Charge"}, Rate: 50, Reason: "INC-restart",
	})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetOperation().GetId()
	if resp.GetMatched() != 300 || resp.GetOperation().GetState() != opRunning {
		t.Fatalf("started %v", resp)
	}
	half := waitOp(t, c, id, "half released", func(op *durablev1.Operation) bool { return op.GetReleased() >= 150 })
	d.Kill()
	killed := time.Now()

	d.Restart()
	c = connect(t, d.Addr)
	resumed, err := c.DescribeOperation(context.Background(), &durablev1.DescribeOperationRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if resumed.GetReleased() < half.GetReleased() {
		t.Fatalf("after the restart %d released, fewer than the %d seen before the kill", resumed.GetReleased(), half.GetReleased())
	}
	if resumed.GetState() != opRunning {
		t.Fatalf("after the restart: %v, want it still running (150 letters at 50/s take 3s)", resumed)
	}
	done := waitOp(t, c, id, "completed", func(op *durablev1.Operation) bool { return op.GetState() != opRunning })
	if done.GetState() != opCompleted || done.GetMatched() != 300 || done.GetReleased() != 300 || done.GetSkipped() != 0 ||
		done.GetLeft() != 0 || done.GetReDeadLettered() != 0 {
		t.Fatalf("finished %v, want 300 of 300 released", done)
	}

	events := redrivenEvents(t, c, wfs)
	var afterRestart []time.Time
	for _, wf := range wfs {
		for a := range 100 {
			evs := events[fmt.Sprintf("%s/%d", wf, a)]
			if len(evs) != 1 {
				t.Errorf("%s/%d redriven %d times, want exactly once", wf, a, len(evs))
				continue
			}
			if evs[0].GetOperationId() != id || evs[0].GetReason() != "INC-restart" || evs[0].GetPrincipal() != "local" {
				t.Errorf("%s/%d: ActivityRedriven = %v", wf, a, evs[0])
			}
			if at := evs[0].GetTime().AsTime(); at.After(killed) {
				afterRestart = append(afterRestart, at)
			}
		}
	}
	if len(events) != int(done.GetReleased()) {
		t.Errorf("%d letters have an ActivityRedriven event, the operation says %d released", len(events), done.GetReleased())
	}
	// Paced from the restart: what was left did not go out as one herd.
	if n := len(afterRestart); n > 1 {
		first, last := afterRestart[0], afterRestart[0]
		for _, at := range afterRestart {
			if at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
		if span, want := last.Sub(first), time.Duration(n-1)*time.Second/50; span < want-100*time.Millisecond {
			t.Errorf("the %d letters released after the restart went out over %v, want about %v at 50/s", n, span, want)
		}
	}
	if n := deadLetterCount(t, c, "Charge"); n != 0 {
		t.Errorf("%d letters left in the DLQ", n)
	}
	if rec := auditRecord(t, c, done.GetAuditId()); rec.GetCount() != 300 || rec.GetMatched() != 300 || !rec.GetDone() || rec.GetOperationId() != id {
		t.Errorf("audit record = %v, want 300 of 300, done, naming %s", rec, id)
	}
}

// TestRedriveOperationCancel: a redrive operation of 300 letters cancelled
// at about half. Nothing is released after the cancel is acknowledged: the
// letters with an ActivityRedriven event of the operation are exactly as
// many as the cancel reported released, all at or before its time, also
// after another operation has gone through the daemon's releaser; the rest
// stay in the dead-letter queue.
func TestRedriveOperationCancel(t *testing.T) {
	t.Parallel()
	d := testdaemon.Exec(t, t.TempDir())
	c := connect(t, d.Addr)
	wfs := letters(t, c, "cancel", "Charge", 3, 100)
	barrier := letters(t, c, "barrier", "Barrier", 1, 1)
	ctx := context.Background()
	resp, err := c.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{
		Filter: &durablev1.DeadLetterFilter{ActivityType: "Charge"}, Rate: 50, Reason: "INC-cancel",
	})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetOperation().GetId()
	waitOp(t, c, id, "half released", func(op *durablev1.Operation) bool { return op.GetReleased() >= 150 })
	cancelled, err := c.CancelOperation(ctx, &durablev1.CancelOperationRequest{Id: id, Reason: "INC-cancel: wrong fix"})
	if err != nil {
		t.Fatal(err)
	}
	released := cancelled.GetReleased()
	if cancelled.GetState() != opCancelled || released < 150 || released >= 300 || cancelled.GetLeft() != 300-released ||
		cancelled.GetCancelledBy() != "local" || cancelled.GetFinishedTime() == nil {
		t.Fatalf("cancel answered %v", cancelled)
	}
	at := cancelled.GetFinishedTime().AsTime()

	// Another operation through the releaser: once it has completed, the
	// releaser has looked at its work again since the cancel.
	b, err := c.RedriveDeadLetters(ctx, &durablev1.RedriveDeadLettersRequest{Filter: &durablev1.DeadLetterFilter{ActivityType: "Barrier"}})
	if err != nil {
		t.Fatal(err)
	}
	waitOp(t, c, b.GetOperation().GetId(), "completed", func(op *durablev1.Operation) bool { return op.GetState() == opCompleted })
	if len(redrivenEvents(t, c, barrier)) != 1 {
		t.Fatal("the barrier letter was not redriven")
	}

	after, err := c.DescribeOperation(ctx, &durablev1.DescribeOperationRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if after.GetState() != opCancelled || after.GetReleased() != released || after.GetLeft() != 300-released {
		t.Errorf("after the cancel: %v, want it as the cancel left it (%d released)", after, released)
	}
	events := redrivenEvents(t, c, wfs)
	for k, evs := range events {
		if len(evs) != 1 || evs[0].GetOperationId() != id {
			t.Errorf("%s: %v, want one ActivityRedriven of %s", k, evs, id)
		}
		if evs[0].GetTime().AsTime().After(at) {
			t.Errorf("%s released at %v, after the cancel at %v", k, evs[0].GetTime().AsTime(), at)
		}
	}
	if len(events) != int(released) {
		t.Errorf("%d letters have an ActivityRedriven event, the cancel said %d were released", len(events), released)
	}
	if n := deadLetterCount(t, c, "Charge"); n != 300-int(released) {
		t.Errorf("%d letters in the DLQ, want the %d the cancel kept", n, 300-released)
	}
	if rec := auditRecord(t, c, after.GetAuditId()); rec.GetCount() != released || !rec.GetDone() {
		t.Errorf("the operation's audit record = %v, want %d and done", rec, released)
	}
}
