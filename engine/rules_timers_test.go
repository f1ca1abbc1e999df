package engine

import (
	"testing"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestActivityTimers(t *testing.T) {
	cases := []struct {
		name    string
		record  func() *durablev1.ActivityRecord
		timer   Timer
		verdict verdictKind
		// the activity afterwards, when the timer acts
		state   durablev1.ActivityState
		lastErr string
		events  []string
		effects []string
	}{
		{
			name:    "StartToCloseExpiryRetriesFromTheDeadline",
			record:  func() *durablev1.ActivityRecord { return startedActivity(1, r0) },
			timer:   Timer{Due: at(30 * time.Second), Kind: ActivityLeaseTimer, WorkflowID: "wf", ID: "a"},
			verdict: verdictLeaseExpired, state: stateRetrying, lastErr: TimeoutStartToClose,
			effects: []string{
				"observe timed out Work StartToCloseTimeout",
				"attempt ended Work at +30s took 30s result timed_out failed true",
				"enqueue activity wf/a on q at +30.5s seq 101",
			},
		},
		{
			name: "HeartbeatExpiryRetriesFromTheHeartbeatDeadline",
			record: func() *durablev1.ActivityRecord {
				a := startedActivity(1, r0)
				a.Info.Options.HeartbeatTimeout = durationpb.New(5 * time.Second)
				a.Info.LastHeartbeatTime = ts(at(3 * time.Second))
				return a
			},
			timer:   Timer{Due: at(8 * time.Second), Kind: ActivityLeaseTimer, WorkflowID: "wf", ID: "a"},
			verdict: verdictLeaseExpired, state: stateRetrying, lastErr: TimeoutHeartbeat,
			effects: []string{
				"observe timed out Work HeartbeatTimeout",
				"attempt ended Work at +8s took 8s result timed_out failed true",
				"enqueue activity wf/a on q at +8.5s seq 101",
			},
		},
		{
			name:    "LastAttemptsExpiryDeadLetters",
			record:  func() *durablev1.ActivityRecord { return startedActivity(3, r0) },
			timer:   Timer{Due: at(30 * time.Second), Kind: ActivityLeaseTimer, WorkflowID: "wf", ID: "a"},
			verdict: verdictLeaseExpired, state: stateDead, lastErr: TimeoutStartToClose,
			events: []string{"8 ACTIVITY_DEAD_LETTERED at +30s activity a attempt 3 failure StartToCloseTimeout scheduled 5"},
			effects: []string{
				"observe timed out Work StartToCloseTimeout",
				"attempt ended Work at +30s took 30s result timed_out failed true",
				"drop timers",
				`dead-lettered StartToCloseTimeout operation ""`,
			},
		},
		{
			name: "LeaseEndingWithTheBudgetDeadLetters",
			record: func() *durablev1.ActivityRecord {
				a := startedActivity(1, r0)
				a.Info.ExpirationTime = ts(at(20 * time.Second))
				return a
			},
			timer:   Timer{Due: at(20 * time.Second), Kind: ActivityLeaseTimer, WorkflowID: "wf", ID: "a"},
			verdict: verdictLeaseExpired, state: stateDead, lastErr: TimeoutScheduleToClose,
			events: []string{"8 ACTIVITY_DEAD_LETTERED at +20s activity a attempt 1 failure ScheduleToCloseTimeout scheduled 5"},
			effects: []string{
				"observe timed out Work ScheduleToCloseTimeout",
				"attempt ended Work at +20s took 20s result timed_out failed true",
				"drop timers",
				`dead-lettered ScheduleToCloseTimeout operation ""`,
			},
		},
		{
			name: "LeaseTimerOfAnEarlierDeadlineIsSetAgainLater",
			record: func() *durablev1.ActivityRecord {
				a := startedActivity(1, r0)
				a.Info.Options.HeartbeatTimeout = durationpb.New(5 * time.Second)
				a.Info.LastHeartbeatTime = ts(at(3 * time.Second))
				return a
			},
			timer:   Timer{Due: at(5 * time.Second), Kind: ActivityLeaseTimer, WorkflowID: "wf", ID: "a"},
			verdict: verdictMovedLater, state: stateStarted,
			effects: []string{"move timer lease wf/a at +8s"},
		},
		{
			name: "LeaseTimerOfAnEndedAttemptDoesNothing",
			record: func() *durablev1.ActivityRecord {
				a := scheduledActivity()
				a.Info.State = stateRetrying
				return a
			},
			timer:   Timer{Due: at(30 * time.Second), Kind: ActivityLeaseTimer, WorkflowID: "wf", ID: "a"},
			verdict: verdictNone, state: stateRetrying,
		},
		{
			name: "ScheduleToStartExpiryDeadLetters",
			record: func() *durablev1.ActivityRecord {
				a := scheduledActivity()
				a.Info.Options.ScheduleToStartTimeout = durationpb.New(10 * time.Second)
				return a
			},
			timer:   Timer{Due: at(10 * time.Second), Kind: ScheduleToStartTimer, WorkflowID: "wf", ID: "a"},
			verdict: verdictNeverStarted, state: stateDead, lastErr: TimeoutScheduleToStart,
			events: []string{"8 ACTIVITY_DEAD_LETTERED at +10s activity a attempt 1 failure ScheduleToStartTimeout scheduled 5"},
			effects: []string{
				"observe timed out Work ScheduleToStartTimeout",
				"drop timers",
				`dead-lettered ScheduleToStartTimeout operation ""`,
			},
		},
		{
			name: "ScheduleToStartOfAnEarlierAttemptDoesNothing",
			record: func() *durablev1.ActivityRecord {
				a := scheduledActivity()
				a.Info.State = stateRetrying
				a.Info.NextAttemptTime = ts(at(5 * time.Second))
				a.Info.Options.ScheduleToStartTimeout = durationpb.New(10 * time.Second)
				return a
			},
			timer:   Timer{Due: at(10 * time.Second), Kind: ScheduleToStartTimer, WorkflowID: "wf", ID: "a"},
			verdict: verdictNone, state: stateRetrying,
		},
		{
			name: "BudgetSpentWhileRetryingDeadLetters",
			record: func() *durablev1.ActivityRecord {
				a := scheduledActivity()
				a.Info.State = stateRetrying
				a.Info.Options.ScheduleToCloseTimeout = durationpb.New(time.Minute)
				a.Info.ExpirationTime = ts(at(time.Minute))
				return a
			},
			timer:   Timer{Due: at(time.Minute), Kind: ScheduleToCloseTimer, WorkflowID: "wf", ID: "a"},
			verdict: verdictBudgetSpent, state: stateDead, lastErr: TimeoutScheduleToClose,
			events: []string{"8 ACTIVITY_DEAD_LETTERED at +1m0s activity a attempt 1 failure ScheduleToCloseTimeout scheduled 5"},
			effects: []string{
				"observe timed out Work ScheduleToCloseTimeout",
				"drop timers",
				`dead-lettered ScheduleToCloseTimeout operation ""`,
			},
		},
		{
			name: "BudgetOfADeadLetterDoesNothing",
			record: func() *durablev1.ActivityRecord {
				a := scheduledActivity()
				a.Info.State = stateDead
				a.Info.ExpirationTime = ts(at(time.Minute))
				return a
			},
			timer:   Timer{Due: at(time.Minute), Kind: ScheduleToCloseTimer, WorkflowID: "wf", ID: "a"},
			verdict: verdictNone, state: stateDead,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := ruleSetup(t)
			a, w := tc.record(), runningWorkflow()
			v := activityTimerVerdict(a, tc.timer, env)
			if v.kind != tc.verdict {
				t.Fatalf("verdict %d, want %d", v.kind, tc.verdict)
			}
			if v.kind == verdictNone {
				return
			}
			s := fireActivityTimer(a, w, tc.timer, v, env)
			in := a.GetInfo()
			if in.GetState() != tc.state || in.GetLastFailure().GetType() != tc.lastErr {
				t.Errorf("state %v, last failure %q; want %v, %q", in.GetState(), in.GetLastFailure().GetType(), tc.state, tc.lastErr)
			}
			checkLines(t, "events", eventLines(s.Events), tc.events)
			checkLines(t, "effects", effectLines(s.Effects), tc.effects)
		})
	}
}

func TestWorkflowTaskTimeout(t *testing.T) {
	cases := []struct {
		name    string
		change  func(*durablev1.WorkflowRecord)
		due     time.Duration
		events  []string
		effects []string
	}{
		{
			name: "ExpiredTaskRetriesFromItsDeadline", due: 10 * time.Second,
			events:  []string{"8 WORKFLOW_TASK_FAILED at +10s attempt 2 failure WorkflowTaskTimeout"},
			effects: []string{"enqueue workflow task wf/ on wq at +12s seq 101"},
		},
		{name: "TimerOfAnEarlierLeaseDoesNothing", due: 5 * time.Second},
		{name: "CompletedTaskDoesNothing", due: 10 * time.Second, change: func(w *durablev1.WorkflowRecord) { w.WtState = wtNone }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := startedTask()
			if tc.change != nil {
				tc.change(w)
			}
			s := workflowTaskTimeout(w, Timer{Due: at(tc.due), Kind: WorkflowTaskLeaseTimer, WorkflowID: "wf"}, ruleSetup(t))
			checkLines(t, "events", eventLines(s.Events), tc.events)
			checkLines(t, "effects", effectLines(s.Effects), tc.effects)
			if len(tc.events) == 0 && s.Workflow != nil {
				t.Errorf("a timer that does nothing writes the workflow")
			}
			if len(tc.events) > 0 && (w.GetWtState() != wtScheduled || w.GetWtAttempt() != 3 || w.GetWtDeadline() != nil) {
				t.Errorf("task %v attempt %d deadline %v; want scheduled attempt 3, no deadline", w.GetWtState(), w.GetWtAttempt(), w.GetWtDeadline())
			}
		})
	}
}

func TestFireUserTimer(t *testing.T) {
	rec := func(fire time.Duration) *durablev1.TimerRecord {
		return &durablev1.TimerRecord{WorkflowId: "wf", TimerId: "t1", FireTime: ts(at(fire))}
	}
	closed := runningWorkflow()
	closed.Info.Status = statusCompleted
	cases := []struct {
		name    string
		rec     *durablev1.TimerRecord
		w       *durablev1.WorkflowRecord
		events  []string
		effects []string
	}{
		{
			name: "TimerFiresAndTheWorkflowRunsAgain", rec: rec(5 * time.Second), w: runningWorkflow(),
			events:  []string{"8 TIMER_FIRED at +6s timer t1", "9 WORKFLOW_TASK_SCHEDULED at +6s"},
			effects: []string{"delete user timer wf/t1", "enqueue workflow task wf/ on wq at +6s seq 101"},
		},
		{name: "TimerOfAClosedWorkflowOnlyGoes", rec: rec(5 * time.Second), w: closed, effects: []string{"delete user timer wf/t1"}},
		{name: "TimerOfAGoneWorkflowOnlyGoes", rec: rec(5 * time.Second), effects: []string{"delete user timer wf/t1"}},
		{name: "EntryOfAnEarlierTimerDoesNothing", rec: rec(9 * time.Second), w: runningWorkflow()},
		{name: "GoneTimerDoesNothing", w: runningWorkflow()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fireUserTimer(tc.rec, tc.w, Timer{Due: at(5 * time.Second), Kind: UserTimer, WorkflowID: "wf", ID: "t1"}, at(6*time.Second), ruleSetup(t))
			checkLines(t, "events", eventLines(s.Events), tc.events)
			checkLines(t, "effects", effectLines(s.Effects), tc.effects)
		})
	}
}
