package tui

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// t0 is the fixed clock of every golden view.
var t0 = time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)

func at(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }

// fakeStream replays events, then ends with end, or else passes on what the
// test pushes on live until its context ends.
type fakeStream struct {
	ctx    context.Context
	events []*durablev1.WatchEvent
	end    error
	live   <-chan *durablev1.WatchEvent
	i      int
}

func (s *fakeStream) Recv() (*durablev1.WatchEvent, error) {
	if s.i < len(s.events) {
		s.i++
		return s.events[s.i-1], nil
	}
	if s.end != nil {
		return nil, s.end
	}
	select {
	case ev := <-s.live:
		return ev, nil
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
}

// script is what one Watch call does.
type script struct {
	events []*durablev1.WatchEvent
	end    error
}

// redriveCall is one call to Redrive.
type redriveCall struct {
	ref    ref
	reason string
}

// bulkCall is one call to RedriveList.
type bulkCall struct {
	refs      []ref
	reason    string
	perSecond int
}

// cancelCall is one call to CancelOperation.
type cancelCall struct {
	id     string
	reason string
}

// fakeBackend plays one script per Watch call (the last one repeats), then
// whatever the test sends on live, and records redrives.
type fakeBackend struct {
	mu         sync.Mutex
	scripts    []script
	live       chan *durablev1.WatchEvent
	watchCalls int
	redrives   []redriveCall
	bulks      []bulkCall
	history    map[string][]*durablev1.HistoryEvent
	// finished is what Describe answers for each workflow.
	finished   map[string][]*durablev1.FinishedActivity
	audit      []*durablev1.AuditRecord
	auditErr   error
	auditCalls int
	// redriveErr fails every redrive, single or bulk.
	redriveErr error
	// bulkGate, when set, holds RedriveList until it is closed or the
	// call's context ends.
	bulkGate chan struct{}
	cancels  []cancelCall
	// stats is what Stats answers; statsCalls counts the reads.
	stats      []*durablev1.ActivityTypeStats
	statsCalls int
	// cancelErr fails every cancel.
	cancelErr error
	overrides []overrideCall
	// overrideErr fails every SetPolicyOverride.
	overrideErr error
}

// overrideCall is one call to SetPolicyOverride.
type overrideCall struct {
	target client.PolicyTarget
	patch  *durablev1.OptionsPatch
	reason string
}

func (f *fakeBackend) SetPolicyOverride(_ context.Context, target client.PolicyTarget, patch *durablev1.OptionsPatch, reason string) (*durablev1.PolicyOverride, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.overrides = append(f.overrides, overrideCall{target: target, patch: patch, reason: reason})
	if f.overrideErr != nil {
		return nil, f.overrideErr
	}
	return &durablev1.PolicyOverride{ActivityType: target.ActivityType, TaskQueue: target.TaskQueue, Patch: patch, Reason: reason, Principal: "ana"}, nil
}

func (f *fakeBackend) overrideCalls() []overrideCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]overrideCall(nil), f.overrides...)
}

func (f *fakeBackend) Watch(ctx context.Context) (WatchStream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.scripts[min(f.watchCalls, len(f.scripts)-1)]
	f.watchCalls++
	return &fakeStream{ctx: ctx, events: s.events, end: s.end, live: f.live}, nil
}

func (f *fakeBackend) Redrive(_ context.Context, workflowID, activityID, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.redrives = append(f.redrives, redriveCall{ref: ref{workflowID: workflowID, activityID: activityID}, reason: reason})
	return f.redriveErr
}

// auditID is the record id the fake daemon gives every bulk redrive.
const auditID = 41

func (f *fakeBackend) RedriveList(ctx context.Context, p RedriveListParams) (*durablev1.Operation, error) {
	f.mu.Lock()
	call := bulkCall{reason: p.Reason, perSecond: p.PerSecond}
	for _, r := range p.Refs {
		call.refs = append(call.refs, ref{workflowID: r.GetWorkflowId(), activityID: r.GetActivityId()})
	}
	f.bulks = append(f.bulks, call)
	gate, err := f.bulkGate, f.redriveErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	n := int64(len(p.Refs))
	return &durablev1.Operation{Id: "op-7", Kind: "redrive", State: durablev1.OperationState_OPERATION_STATE_RUNNING,
		Principal: "ana", Role: "operator", Reason: p.Reason, StartedTime: at(0),
		Matched: n, Left: n, Rate: float64(p.PerSecond), Listed: true, AuditId: auditID}, nil
}

// CancelOperation answers as the daemon does for a running operation of
// 300 letters of which 120 were released: cancelled by ana, 180 left.
func (f *fakeBackend) CancelOperation(_ context.Context, id, reason string) (*durablev1.Operation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, cancelCall{id: id, reason: reason})
	if f.cancelErr != nil {
		return nil, f.cancelErr
	}
	return &durablev1.Operation{Id: id, Kind: "redrive", State: durablev1.OperationState_OPERATION_STATE_CANCELLED,
		Principal: "ana", Matched: 300, Released: 120, Left: 180, Rate: 50, StartedTime: at(-10 * time.Second),
		FinishedTime: at(0), CancelledBy: "ana", CancelReason: reason}, nil
}

func (f *fakeBackend) cancelCalls() []cancelCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cancelCall(nil), f.cancels...)
}

func (f *fakeBackend) AuditLog(_ context.Context, limit int) ([]*durablev1.AuditRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auditCalls++
	if f.auditErr != nil {
		return nil, f.auditErr
	}
	return f.audit[:min(limit, len(f.audit))], nil
}

func (f *fakeBackend) Stats(context.Context, time.Time) ([]*durablev1.ActivityTypeStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statsCalls++
	return f.stats, nil
}

func (f *fakeBackend) History(_ context.Context, workflowID string) ([]*durablev1.HistoryEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.history[workflowID]; ok {
		return h, nil
	}
	return nil, errors.New("workflow not found")
}

func (f *fakeBackend) Describe(_ context.Context, workflowID string) (*durablev1.DescribeWorkflowResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.history[workflowID]; !ok {
		return nil, errors.New("workflow not found")
	}
	return &durablev1.DescribeWorkflowResponse{
		Workflow:           &durablev1.WorkflowInfo{WorkflowId: workflowID},
		FinishedActivities: f.finished[workflowID],
	}, nil
}

func (f *fakeBackend) singleCalls() []redriveCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]redriveCall(nil), f.redrives...)
}

func (f *fakeBackend) bulkCalls() []bulkCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bulkCall(nil), f.bulks...)
}

func snapshot(acts []*durablev1.PendingActivity, wfs []*durablev1.WorkflowInfo) []*durablev1.WatchEvent {
	return []*durablev1.WatchEvent{
		{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT, Activities: acts, Workflows: wfs},
		{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE},
	}
}

var (
	stScheduled = durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED
	stStarted   = durablev1.ActivityState_ACTIVITY_STATE_STARTED
	stRetrying  = durablev1.ActivityState_ACTIVITY_STATE_RETRYING
	stDead      = durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
)

func fail(typ, msg string) *durablev1.Failure { return &durablev1.Failure{Type: typ, Message: msg} }

func act(wf, id, typ string, s durablev1.ActivityState, attempt, maxAttempts int32) *durablev1.PendingActivity {
	return &durablev1.PendingActivity{
		WorkflowId: wf, ActivityId: id, ActivityType: typ, TaskQueue: "default", State: s,
		Attempt: attempt, MaxAttempts: maxAttempts, IdempotencyKey: wf + "/" + id,
		ScheduledTime: at(-time.Minute),
		Options: &durablev1.ActivityOptions{
			StartToCloseTimeout: durationpb.New(30 * time.Second),
			RetryPolicy:         &durablev1.RetryPolicy{InitialMs: 1000, Backoff: 2, MaxIntervalMs: 60000},
		},
	}
}

// fixtureActivities covers every state and wait reason.
func fixtureActivities() []*durablev1.PendingActivity {
	charge := act("order-1001", "1", "ChargeCard", stRetrying, 3, 5)
	charge.NextAttemptTime = at(4200 * time.Millisecond)
	charge.LastFailure = fail("CardDeclined", "issuer timed out\nafter 3 tries")
	charge.LastWorkerIdentity = "worker-b"
	charge.Attempts = []*durablev1.AttemptRecord{
		{Attempt: 1, Identity: "worker-a", StartedTime: at(-8 * time.Second), EndedTime: at(-7900 * time.Millisecond), Failure: fail("CardDeclined", "issuer timed out")},
		{Attempt: 2, Identity: "worker-b", StartedTime: at(-3 * time.Second), EndedTime: at(-2800 * time.Millisecond), Failure: fail("CardDeclined", "issuer timed out")},
	}
	charge.Options.RetryPolicy.NonRetryable = []string{"CardStolen"}

	reserve := act("order-1001", "2", "ReserveStock", stStarted, 1, 5)
	reserve.LeaseDeadline = at(27 * time.Second)
	reserve.LastHeartbeatTime = at(-3 * time.Second)
	reserve.HeartbeatDetails = []byte(`{"done": 420, "total": 1000}`)

	queued := act("order-1002", "1", "ChargeCard", stScheduled, 1, 5)
	queued.NextAttemptTime = at(-12 * time.Second)

	copyChunk := act("backfill-7", "3", "CopyChunk", stStarted, 3, 8)
	copyChunk.LeaseDeadline = at(2*time.Minute + 10*time.Second)
	copyChunk.LastHeartbeatTime = at(-1500 * time.Millisecond)
	copyChunk.HeartbeatDetails = []byte(`{"file":"part-0003","offset":1048576}`)
	copyChunk.LastFailure = fail("HeartbeatTimeout", "no heartbeat for 10s")

	var dead []*durablev1.PendingActivity
	for i, d := range []struct {
		wf, id, typ string
		ago         time.Duration
		f           *durablev1.Failure
	}{
		{"order-0990", "1", "ChargeCard", 5 * time.Minute, fail("GatewayTimeout", "upstream answered 504")},
		{"order-0991", "1", "ChargeCard", 3 * time.Minute, fail("GatewayTimeout", "upstream answered 504")},
		{"order-0995", "2", "SendEmail", 40 * time.Second, fail("SMTPRejected", "mailbox full")},
	} {
		a := act(d.wf, d.id, d.typ, stDead, 5, 5)
		a.DeadLetteredTime = at(-d.ago)
		a.LastFailure = d.f
		a.Redrives = int32(i % 2)
		dead = append(dead, a)
	}
	return append([]*durablev1.PendingActivity{charge, reserve, queued, copyChunk}, dead...)
}

func fixtureWorkflows() []*durablev1.WorkflowInfo {
	running := durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING
	wf := func(id, typ string, ago time.Duration, pending, dead int32) *durablev1.WorkflowInfo {
		return &durablev1.WorkflowInfo{WorkflowId: id, WorkflowType: typ, TaskQueue: "default", Status: running,
			StartTime: at(-ago), PendingActivities: pending, DeadLetters: dead}
	}
	done := wf("order-0900", "FlakyDemo", time.Hour, 0, 0)
	done.Status = durablev1.WorkflowStatus_WORKFLOW_STATUS_COMPLETED
	done.CloseTime = at(-59 * time.Minute)
	done.Result = []byte(`{"charged":true}`)
	failed := wf("order-0901", "FlakyDemo", 50*time.Minute, 0, 0)
	failed.Status = durablev1.WorkflowStatus_WORKFLOW_STATUS_FAILED
	failed.CloseTime = at(-49 * time.Minute)
	failed.Failure = fail("CardStolen", "card reported stolen")
	return []*durablev1.WorkflowInfo{
		wf("order-1001", "FlakyDemo", time.Minute, 2, 0),
		wf("order-1002", "FlakyDemo", 20*time.Second, 1, 0),
		wf("backfill-7", "ResumableBackfill", 10*time.Minute, 1, 0),
		wf("order-0990", "FlakyDemo", 6*time.Minute, 1, 1),
		wf("order-0991", "FlakyDemo", 4*time.Minute, 1, 1),
		wf("order-0995", "FlakyDemo", 2*time.Minute, 1, 1),
		done, failed,
	}
}

func fixtureHistory() map[string][]*durablev1.HistoryEvent {
	ev := func(id int64, d time.Duration, t durablev1.EventType) *durablev1.HistoryEvent {
		return &durablev1.HistoryEvent{EventId: id, Time: at(d), Type: t}
	}
	h := []*durablev1.HistoryEvent{
		ev(1, -time.Minute, durablev1.EventType_EVENT_TYPE_WORKFLOW_EXECUTION_STARTED),
		ev(2, -time.Minute, durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
		ev(3, -59*time.Second, durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_STARTED),
		ev(4, -59*time.Second, durablev1.EventType_EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
		ev(5, -59*time.Second, durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
		ev(6, -59*time.Second, durablev1.EventType_EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
		ev(7, -10*time.Second, durablev1.EventType_EVENT_TYPE_TIMER_STARTED),
	}
	h[0].WorkflowType, h[0].TaskQueue, h[0].Input = "FlakyDemo", "default", []byte(`{"order":1001}`)
	h[2].Identity, h[3].Identity = "worker-a", "worker-a"
	h[4].ActivityId, h[4].ActivityType = "1", "ChargeCard"
	h[5].ActivityId, h[5].ActivityType = "2", "ReserveStock"
	h[6].TimerId, h[6].TimerDuration = "t1", durationpb.New(time.Minute)
	return map[string][]*durablev1.HistoryEvent{"order-1001": h}
}

// fixtureAudit is a log with a bulk redrive still running, a finished one
// with a reason, a single redrive and an older sweep that skipped some.
func fixtureAudit() []*durablev1.AuditRecord {
	refs := func(names ...string) []*durablev1.ActivityRef {
		var out []*durablev1.ActivityRef
		for _, n := range names {
			wf, id, _ := strings.Cut(n, "/")
			out = append(out, &durablev1.ActivityRef{WorkflowId: wf, ActivityId: id})
		}
		return out
	}
	return []*durablev1.AuditRecord{
		{Id: 42, Time: at(-30 * time.Second), Principal: "ops-bot", Role: "operator", Rpc: "RedriveDeadLetters", OperationId: "op-6",
			Reason:  "nightly sweep after the card gateway's maintenance window",
			Filter:  &durablev1.DeadLetterFilter{ActivityType: "ChargeCard", FailureType: "GatewayTimeout"},
			Matched: 120, Count: 45, Activities: refs("order-0801/1", "order-0802/1")},
		{Id: 41, Time: at(-2 * time.Minute), Principal: "ana", Role: "operator", Rpc: "RedriveDeadLetters",
			Reason:  "INC-7 gateway back, redriving the timeouts",
			Matched: 3, Count: 3, Done: true, Activities: refs("order-0980/1", "order-0981/1", "order-0982/1")},
		{Id: 40, Time: at(-10 * time.Minute), Principal: "ana", Role: "operator", Rpc: "SetPolicyOverride",
			Reason: "INC-6 card API slow", Matched: 1, Count: 1, Done: true,
			PolicyOverride: &durablev1.PolicyOverride{ActivityType: "ChargeCard",
				Patch: &durablev1.OptionsPatch{MaxAttempts: proto.Int32(8), StartToCloseTimeout: durationpb.New(30 * time.Second)}}},
		{Id: 39, Time: at(-65 * time.Minute), Principal: "local", Role: "operator", Rpc: "RedriveDeadLetter",
			Matched: 1, Count: 1, Done: true, Activities: refs("order-0970/2")},
		{Id: 38, Time: at(-26 * time.Hour), Principal: "ana", Role: "operator", Rpc: "RedriveDeadLetters", Reason: "INC-5", OperationId: "op-4",
			Filter: &durablev1.DeadLetterFilter{}, Matched: 12, Count: 10, Done: true,
			Activities: refs("order-0901/1", "order-0902/1", "order-0903/1", "order-0904/1", "order-0905/1",
				"order-0906/1", "order-0907/1", "order-0908/1", "order-0909/1", "order-0910/1")},
	}
}

// fixtureOperations are a running redrive with some of every count, one
// cancelled half way and one long completed.
func fixtureOperations() []*durablev1.Operation {
	return []*durablev1.Operation{
		{Id: "op-4", Kind: "redrive", State: durablev1.OperationState_OPERATION_STATE_COMPLETED,
			Principal: "ana", Role: "operator", Reason: "INC-5", Filter: &durablev1.DeadLetterFilter{},
			Rate: 50, Matched: 3, Released: 3, StartedTime: at(-61 * time.Minute), FinishedTime: at(-61*time.Minute + 40*time.Millisecond), AuditId: 38},
		{Id: "op-6", Kind: "redrive", State: durablev1.OperationState_OPERATION_STATE_RUNNING,
			Principal: "ana", Role: "operator", Reason: "INC-7 gateway back, redriving the timeouts",
			Filter: &durablev1.DeadLetterFilter{ActivityType: "ChargeCard", FailureType: "GatewayTimeout"},
			Rate:   5, Matched: 300, Released: 120, Skipped: 2, ReDeadLettered: 1, Left: 178,
			StartedTime: at(-25 * time.Second), AuditId: 42, Node: "node-2"},
		{Id: "op-5", Kind: "redrive", State: durablev1.OperationState_OPERATION_STATE_CANCELLED,
			Principal: "ops-bot", Role: "operator", Listed: true, Rate: 50, Matched: 40, Released: 12, Left: 28,
			StartedTime: at(-10 * time.Minute), FinishedTime: at(-10*time.Minute + 3*time.Second), AuditId: 40,
			CancelledBy: "ana", CancelReason: "wrong group"},
	}
}

// opsBackend is fixtureBackend with operations in the snapshot.
func opsBackend() *fakeBackend {
	f := fixtureBackend()
	evs := snapshot(fixtureActivities(), fixtureWorkflows())
	evs[0].Operations = fixtureOperations()
	f.scripts = []script{{events: evs}}
	return f
}

// fixtureQueues are a busy queue with pollers and leases, one whose
// workflow tasks nobody polls for, and an idle one.
func fixtureQueues() *durablev1.TaskQueueList {
	wfKind, actKind := durablev1.TaskKind_TASK_KIND_WORKFLOW, durablev1.TaskKind_TASK_KIND_ACTIVITY
	return &durablev1.TaskQueueList{TaskQueues: []*durablev1.TaskQueue{
		{Name: "default",
			Pollers: []*durablev1.Poller{
				{Identity: "worker-a@host-1", Kind: wfKind, LastPollTime: at(-400 * time.Millisecond), Parked: true},
				{Identity: "worker-a@host-1", Kind: actKind, LastPollTime: at(-2 * time.Second)},
				{Identity: "worker-b@host-2", Kind: actKind, LastPollTime: at(-1 * time.Second), Parked: true},
			},
			WorkflowTasks: &durablev1.TaskBacklog{},
			ActivityTasks: &durablev1.TaskBacklog{Ready: 1, OldestReadyTime: at(-12 * time.Second), Later: 1},
			Leases:        []*durablev1.WorkerLeases{{Identity: "worker-a@host-1", Activities: 1}, {Identity: "worker-b@host-2", Activities: 1}}},
		{Name: "reports", Pollers: []*durablev1.Poller{{Identity: "reporter", Kind: wfKind, LastPollTime: at(-3 * time.Minute)}},
			WorkflowTasks: &durablev1.TaskBacklog{}, ActivityTasks: &durablev1.TaskBacklog{}},
		{Name: "orders-eu",
			WorkflowTasks: &durablev1.TaskBacklog{Ready: 1, OldestReadyTime: at(-5900 * time.Millisecond), Stalled: true},
			ActivityTasks: &durablev1.TaskBacklog{},
			Stalled:       true},
	}}
}

// stalledWorkflow is a running workflow whose first workflow task has
// waited 5.9s on orders-eu, which nobody polls.
func stalledWorkflow() *durablev1.WorkflowInfo {
	return &durablev1.WorkflowInfo{WorkflowId: "order-2001", WorkflowType: "FlakyDemo", TaskQueue: "orders-eu",
		Status: durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING, StartTime: at(-5900 * time.Millisecond),
		WorkflowTaskReadyTime: at(-5900 * time.Millisecond), WorkflowTaskAttempt: 1}
}

// queuesBackend is fixtureBackend with the task queues in the snapshot and
// a workflow stalled on one of them.
func queuesBackend() *fakeBackend {
	f := fixtureBackend()
	evs := snapshot(fixtureActivities(), append(fixtureWorkflows(), stalledWorkflow()))
	evs[1].TaskQueues = fixtureQueues()
	f.scripts = []script{{events: evs}}
	return f
}
