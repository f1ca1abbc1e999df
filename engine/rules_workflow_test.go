package engine

import (
	"errors"
	"testing"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestStartWorkflow(t *testing.T) {
	t.Run("NewWorkflowGetsItsFirstTask", func(t *testing.T) {
		env := ruleSetup(t)
		req := &durablev1.StartWorkflowRequest{WorkflowId: "wf", WorkflowType: "Flow", TaskQueue: "wq", Input: []byte("x")}
		s, err := startWorkflow(req, false, r0, env)
		if err != nil {
			t.Fatal(err)
		}
		w := s.Workflow
		if w.GetInfo().GetStatus() != statusRunning || !w.GetInfo().GetStartTime().AsTime().Equal(r0) || string(w.GetInput()) != "x" ||
			w.GetWtState() != wtScheduled || w.GetWtAttempt() != 1 || w.GetWtSeq() != 101 || w.GetNextEventId() != 3 || w.GetInfo().GetHistoryLength() != 2 {
			t.Errorf("workflow %v", w)
		}
		checkLines(t, "events", eventLines(s.Events), []string{"1 WORKFLOW_EXECUTION_STARTED at +0s", "2 WORKFLOW_TASK_SCHEDULED at +0s"})
		checkLines(t, "effects", effectLines(s.Effects), []string{"enqueue workflow task wf/ on wq at +0s seq 101"})
	})
	t.Run("ExistingIdIsRefused", func(t *testing.T) {
		if _, err := startWorkflow(&durablev1.StartWorkflowRequest{WorkflowId: "wf"}, true, r0, ruleSetup(t)); !errors.Is(err, ErrAlreadyExists) {
			t.Fatalf("err %v, want ErrAlreadyExists", err)
		}
	})
}

// scheduledTask is runningWorkflow with its task attempt 2 scheduled under
// sequence number 42.
func scheduledTask() *durablev1.WorkflowRecord {
	w := runningWorkflow()
	w.WtState, w.WtAttempt, w.WtSeq, w.WtDue = wtScheduled, 2, 42, ts(r0)
	return w
}

// startedTask is runningWorkflow with its task attempt 2 leased at r0
// under lease 900 until +10s.
func startedTask() *durablev1.WorkflowRecord {
	w := runningWorkflow()
	w.WtState, w.WtAttempt, w.WtLeaseId, w.WtDeadline = wtStarted, 2, 900, ts(at(10*time.Second))
	return w
}

func wtToken(w *durablev1.WorkflowRecord) *durablev1.TaskToken {
	return &durablev1.TaskToken{WorkflowId: "wf", Attempt: w.GetWtAttempt(), LeaseId: w.GetWtLeaseId()}
}

func TestLeaseWorkflowTask(t *testing.T) {
	cases := []struct {
		name    string
		change  func(*durablev1.WorkflowRecord)
		seq     int64
		wantErr error
	}{
		{name: "ScheduledTaskStartsWithItsTimeout", seq: 42},
		{name: "EntryOfAnEarlierSchedulingIsStale", seq: 41, wantErr: errStaleEntry},
		{name: "StartedTaskIsStale", seq: 42, wantErr: errStaleEntry, change: func(w *durablev1.WorkflowRecord) { w.WtState = wtStarted }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := ruleSetup(t)
			w := scheduledTask()
			if tc.change != nil {
				tc.change(w)
			}
			before := proto.Clone(w)
			s, err := leaseWorkflowTask(w, QueueEntry{Seq: tc.seq}, "w1", at(time.Second), env)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !proto.Equal(w, before) {
					t.Fatalf("err %v, want %v and the record as it was", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Workflow != w || w.GetWtState() != wtStarted || w.GetWtLeaseId() != 7001 || !w.GetWtDeadline().AsTime().Equal(at(11*time.Second)) {
				t.Errorf("workflow task %v lease %d deadline %v; want started, lease 7001, until +11s", w.GetWtState(), w.GetWtLeaseId(), w.GetWtDeadline())
			}
			checkLines(t, "events", eventLines(s.Events), []string{"8 WORKFLOW_TASK_STARTED at +1s attempt 2 by w1"})
			checkLines(t, "effects", effectLines(s.Effects), []string{"set timer workflow-task-lease wf/ at +11s"})
		})
	}
}

func TestCompleteWorkflowTask(t *testing.T) {
	schedule := func(id string, opts *durablev1.ActivityOptions) *durablev1.Command {
		return &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: id, ActivityType: "Pay", Input: []byte("in"), ActivityOptions: opts}
	}
	timer := func(id string) *durablev1.Command {
		return &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_START_TIMER, TimerId: id, TimerDuration: durationpb.New(5 * time.Second)}
	}
	complete := &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_COMPLETE_WORKFLOW, Result: []byte("done")}
	fail := &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_FAIL_WORKFLOW, Failure: &durablev1.Failure{Type: "Bad"}}
	cases := []struct {
		name      string
		cmds      []*durablev1.Command
		facts     []commandFacts
		dirty     bool
		token     func(*durablev1.TaskToken)
		wantErr   string // the field an *InvalidError names
		stale     bool
		events    []string
		effects   []string
		status    durablev1.WorkflowStatus
		wt        durablev1.WorkflowTaskState
		pending   int32
		check     func(t *testing.T, s step)
		scheduled int
	}{
		{
			name: "ScheduledActivityGetsTheDefaults", cmds: []*durablev1.Command{schedule("b", nil)},
			events:  []string{"8 WORKFLOW_TASK_COMPLETED at +2s by w1", "9 ACTIVITY_TASK_SCHEDULED at +2s activity b"},
			effects: []string{"enqueue activity wf/b on wq at +2s seq 101"},
			status:  statusRunning, wt: wtNone, pending: 2, scheduled: 1,
			check: func(t *testing.T, s step) {
				in := s.Scheduled[0].GetInfo()
				if s.Scheduled[0].GetScheduledEventId() != 9 || in.GetMaxAttempts() != 5 || in.GetOptions().GetStartToCloseTimeout().AsDuration() != 10*time.Minute ||
					in.GetTaskQueue() != "wq" || in.GetIdempotencyKey() != "wf/b" || in.GetState() != stateScheduled || in.GetAttempt() != 1 ||
					in.GetExpirationTime() != nil || string(s.Scheduled[0].GetInput()) != "in" || s.Scheduled[0].GetWorkflowType() != "Flow" {
					t.Errorf("scheduled %v", s.Scheduled[0])
				}
				if !proto.Equal(s.Events[1].GetActivityOptions(), in.GetOptions()) {
					t.Errorf("the event records options %v, the activity has %v", s.Events[1].GetActivityOptions(), in.GetOptions())
				}
			},
		},
		{
			name: "BudgetIsTheStartToCloseDefaultAndGetsItsTimer",
			cmds: []*durablev1.Command{schedule("b", &durablev1.ActivityOptions{TaskQueue: "pay", ScheduleToCloseTimeout: durationpb.New(time.Minute),
				RetryPolicy: &durablev1.RetryPolicy{MaxAttempts: 9}})},
			events:  []string{"8 WORKFLOW_TASK_COMPLETED at +2s by w1", "9 ACTIVITY_TASK_SCHEDULED at +2s activity b"},
			effects: []string{"enqueue activity wf/b on pay at +2s seq 101", "set timer schedule-to-close wf/b at +1m2s"},
			status:  statusRunning, wt: wtNone, pending: 2, scheduled: 1,
			check: func(t *testing.T, s step) {
				in := s.Scheduled[0].GetInfo()
				if in.GetMaxAttempts() != 9 || in.GetOptions().GetStartToCloseTimeout().AsDuration() != time.Minute || !in.GetExpirationTime().AsTime().Equal(at(62*time.Second)) {
					t.Errorf("scheduled %v", in)
				}
			},
		},
		{
			name: "TimerStarts", cmds: []*durablev1.Command{timer("t1")},
			events: []string{"8 WORKFLOW_TASK_COMPLETED at +2s by w1", "9 TIMER_STARTED at +2s timer t1"},
			status: statusRunning, wt: wtNone, pending: 1,
			check: func(t *testing.T, s step) {
				if len(s.Timers) != 1 || s.Timers[0].GetTimerId() != "t1" || !s.Timers[0].GetFireTime().AsTime().Equal(at(7*time.Second)) || s.Timers[0].GetStartedEventId() != 9 {
					t.Errorf("timers %v, want t1 firing at +7s, started by event 9", s.Timers)
				}
			},
		},
		{
			name: "CompleteClosesTheWorkflow", cmds: []*durablev1.Command{schedule("b", nil), complete},
			events:  []string{"8 WORKFLOW_TASK_COMPLETED at +2s by w1", "9 ACTIVITY_TASK_SCHEDULED at +2s activity b", "10 WORKFLOW_EXECUTION_COMPLETED at +2s"},
			effects: []string{"enqueue activity wf/b on wq at +2s seq 101", "close workflow at +2s"},
			status:  statusCompleted, wt: wtNone, pending: 0, scheduled: 1,
			check: func(t *testing.T, s step) {
				if string(s.Workflow.GetInfo().GetResult()) != "done" || !s.Workflow.GetInfo().GetCloseTime().AsTime().Equal(at(2*time.Second)) {
					t.Errorf("workflow %v, want result done, closed at +2s", s.Workflow.GetInfo())
				}
			},
		},
		{
			name: "FailClosesTheWorkflow", cmds: []*durablev1.Command{fail},
			events:  []string{"8 WORKFLOW_TASK_COMPLETED at +2s by w1", "9 WORKFLOW_EXECUTION_FAILED at +2s failure Bad"},
			effects: []string{"close workflow at +2s"},
			status:  statusFailed, wt: wtNone, pending: 0,
		},
		{
			name: "DirtyTaskIsFollowedByAnother", dirty: true,
			events:  []string{"8 WORKFLOW_TASK_COMPLETED at +2s by w1", "9 WORKFLOW_TASK_SCHEDULED at +2s"},
			effects: []string{"enqueue workflow task wf/ on wq at +2s seq 101"},
			status:  statusRunning, wt: wtScheduled, pending: 1,
		},
		{name: "ActivityIdUsedBeforeIsRefused", cmds: []*durablev1.Command{schedule("b", nil)}, facts: []commandFacts{{activityIDUsed: true}}, wantErr: "commands[0].activity_id"},
		{name: "RunningTimerIsRefused", cmds: []*durablev1.Command{timer("t1")}, facts: []commandFacts{{timerRunning: true}}, wantErr: "commands[0].timer_id"},
		{name: "TimerStartedTwiceInOneTaskIsRefused", cmds: []*durablev1.Command{timer("t1"), timer("t1")}, wantErr: "commands[1].timer_id"},
		{name: "CommandAfterTheCloseIsRefused", cmds: []*durablev1.Command{complete, timer("t1")}, wantErr: "commands[1]"},
		{name: "UnknownCommandIsRefused", cmds: []*durablev1.Command{{}}, wantErr: "commands[0].type"},
		{name: "StaleLeaseIsRefused", token: func(t *durablev1.TaskToken) { t.LeaseId = 1 }, stale: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := ruleSetup(t)
			w := startedTask()
			w.WtDirty = tc.dirty
			tok := wtToken(w)
			if tc.token != nil {
				tc.token(tok)
			}
			facts := tc.facts
			if facts == nil {
				facts = make([]commandFacts, len(tc.cmds))
			}
			s, err := completeWorkflowTask(w, tok, &durablev1.CompleteWorkflowTaskRequest{Commands: tc.cmds, Identity: "w1"}, facts, at(2*time.Second), env)
			var inv *InvalidError
			switch {
			case tc.stale:
				if !errors.Is(err, ErrStaleTask) {
					t.Fatalf("err %v, want ErrStaleTask", err)
				}
				return
			case tc.wantErr != "":
				if !errors.As(err, &inv) || inv.Field != tc.wantErr {
					t.Fatalf("err %v, want an *InvalidError naming %s", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			checkLines(t, "events", eventLines(s.Events), tc.events)
			checkLines(t, "effects", effectLines(s.Effects), tc.effects)
			if s.Workflow != w || w.GetInfo().GetStatus() != tc.status || w.GetWtState() != tc.wt || w.GetWtDeadline() != nil ||
				w.GetInfo().GetPendingActivities() != tc.pending || len(s.Scheduled) != tc.scheduled || w.GetInfo().GetHistoryLength() != w.GetNextEventId()-1 {
				t.Errorf("workflow %v task %v deadline %v, %d scheduled; want status %v, task %v, %d pending, %d scheduled",
					w.GetInfo(), w.GetWtState(), w.GetWtDeadline(), len(s.Scheduled), tc.status, tc.wt, tc.pending, tc.scheduled)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestFailWorkflowTask(t *testing.T) {
	cases := []struct {
		name    string
		failure *durablev1.Failure
		token   func(*durablev1.TaskToken)
		stale   bool
		events  []string
		effects []string
		status  durablev1.WorkflowStatus
		wt      durablev1.WorkflowTaskState
	}{
		{
			name: "RetryableFailureRetriesAfterTheDefaultBackoff", failure: &durablev1.Failure{Type: "Panic"},
			events:  []string{"8 WORKFLOW_TASK_FAILED at +3s attempt 2 by w1 failure Panic"},
			effects: []string{"enqueue workflow task wf/ on wq at +5s seq 101"},
			status:  statusRunning, wt: wtScheduled,
		},
		{
			name: "NonRetryableFailureFailsTheWorkflow", failure: &durablev1.Failure{Type: "Refused", NonRetryable: true},
			events:  []string{"8 WORKFLOW_TASK_FAILED at +3s attempt 2 by w1 failure Refused", "9 WORKFLOW_EXECUTION_FAILED at +3s failure Refused"},
			effects: []string{"close workflow at +3s"},
			status:  statusFailed, wt: wtNone,
		},
		{name: "StaleLeaseIsRefused", failure: &durablev1.Failure{}, token: func(t *durablev1.TaskToken) { t.LeaseId = 1 }, stale: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := ruleSetup(t)
			w := startedTask()
			tok := wtToken(w)
			if tc.token != nil {
				tc.token(tok)
			}
			s, err := failWorkflowTask(w, tok, &durablev1.FailWorkflowTaskRequest{Failure: tc.failure, Identity: "w1"}, at(3*time.Second), env)
			if tc.stale {
				if !errors.Is(err, ErrStaleTask) {
					t.Fatalf("err %v, want ErrStaleTask", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkLines(t, "events", eventLines(s.Events), tc.events)
			checkLines(t, "effects", effectLines(s.Effects), tc.effects)
			if s.Workflow != w || w.GetInfo().GetStatus() != tc.status || w.GetWtState() != tc.wt || w.GetWtDeadline() != nil {
				t.Errorf("workflow %v task %v; want %v, %v", w.GetInfo().GetStatus(), w.GetWtState(), tc.status, tc.wt)
			}
			if tc.wt == wtScheduled && (w.GetWtAttempt() != 3 || w.GetWtSeq() != 101) {
				t.Errorf("task attempt %d seq %d, want attempt 3 under seq 101", w.GetWtAttempt(), w.GetWtSeq())
			}
		})
	}
}
