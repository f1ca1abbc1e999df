package engine

import (
	"errors"
	"testing"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestLeaseActivity(t *testing.T) {
	cases := []struct {
		name     string
		change   func(a *durablev1.ActivityRecord, env *ruleEnv)
		seq      int64
		wantErr  error
		deadline time.Duration
		effects  []string
		max      int32
		hb       time.Duration
	}{
		{
			name: "ScheduledAttemptStartsWithLeaseAtStartToClose", seq: 42, deadline: 32 * time.Second, max: 3,
			effects: []string{"set timer lease wf/a at +32s", "observe started Work attempt 1 waited 2s"},
		},
		{
			name: "HeartbeatTimeoutEndsTheLeaseFirst", seq: 42, deadline: 7 * time.Second, max: 3, hb: 5 * time.Second,
			change: func(a *durablev1.ActivityRecord, _ *ruleEnv) {
				a.Info.Options.HeartbeatTimeout = durationpb.New(5 * time.Second)
			},
			effects: []string{"set timer lease wf/a at +7s", "observe started Work attempt 1 waited 2s"},
		},
		{
			name: "BudgetEndsTheLeaseFirst", seq: 42, deadline: 12 * time.Second, max: 3,
			change:  func(a *durablev1.ActivityRecord, _ *ruleEnv) { a.Info.ExpirationTime = ts(at(12 * time.Second)) },
			effects: []string{"set timer lease wf/a at +12s", "observe started Work attempt 1 waited 2s"},
		},
		{
			name: "OverrideInForceSetsLeaseAndMaxAttempts", seq: 42, deadline: 12 * time.Second, max: 7,
			change: func(_ *durablev1.ActivityRecord, env *ruleEnv) {
				env.Overrides = overrideTable{{"Work", ""}: {ActivityType: "Work", Patch: &durablev1.OptionsPatch{
					StartToCloseTimeout: durationpb.New(10 * time.Second), MaxAttempts: proto.Int32(7)}}}
			},
			effects: []string{"set timer lease wf/a at +12s", "observe started Work attempt 1 waited 2s"},
		},
		{
			name: "RetryDueEarlierCountsNoNegativeWait", seq: 42, deadline: 32 * time.Second, max: 3,
			change:  func(a *durablev1.ActivityRecord, _ *ruleEnv) { a.Info.NextAttemptTime = ts(at(5 * time.Second)) },
			effects: []string{"set timer lease wf/a at +32s", "observe started Work attempt 1 waited 0s"},
		},
		{name: "EntryOfAnEarlierQueueingIsStale", seq: 41, wantErr: errStaleEntry},
		{
			name: "StartedActivityIsStale", seq: 42, wantErr: errStaleEntry,
			change: func(a *durablev1.ActivityRecord, _ *ruleEnv) { a.Info.State = stateStarted },
		},
		{
			name: "DeadLetterIsStale", seq: 42, wantErr: errStaleEntry,
			change: func(a *durablev1.ActivityRecord, _ *ruleEnv) { a.Info.State = stateDead },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := ruleSetup(t)
			a := scheduledActivity()
			if tc.change != nil {
				tc.change(a, env)
			}
			before := proto.Clone(a)
			now := at(2 * time.Second)
			s, task, err := leaseActivity(a, QueueEntry{Seq: tc.seq}, "w2", now, env)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !proto.Equal(a, before) {
					t.Fatalf("err %v (record changed: %t), want %v and the record as it was", err, !proto.Equal(a, before), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			in := a.GetInfo()
			if s.Activity != a || s.Workflow != nil || len(s.Events) != 0 {
				t.Errorf("step writes activity %p workflow %v with %d events; want the activity alone", s.Activity, s.Workflow, len(s.Events))
			}
			if in.GetState() != stateStarted || a.GetLeaseId() != 7001 || !in.GetLastStartedTime().AsTime().Equal(now) ||
				in.GetLastWorkerIdentity() != "w2" || in.GetNextAttemptTime() != nil || !in.GetLeaseDeadline().AsTime().Equal(at(tc.deadline)) {
				t.Errorf("record: state %v lease %d started %s by %q next %v deadline %s; want STARTED, 7001, +2s, w2, none, %s",
					in.GetState(), a.GetLeaseId(), rel(in.GetLastStartedTime().AsTime()), in.GetLastWorkerIdentity(), in.GetNextAttemptTime(),
					rel(in.GetLeaseDeadline().AsTime()), rel(at(tc.deadline)))
			}
			if n := len(in.GetAttempts()); n != 1 || in.GetAttempts()[0].GetIdentity() != "w2" || !in.GetAttempts()[0].GetStartedTime().AsTime().Equal(now) ||
				in.GetAttempts()[0].GetEndedTime() != nil {
				t.Errorf("attempt trail %v, want one open attempt by w2 from +2s", in.GetAttempts())
			}
			if !proto.Equal(in.GetOptions(), before.(*durablev1.ActivityRecord).GetInfo().GetOptions()) {
				t.Errorf("the record's options changed to %v; an override is only a view", in.GetOptions())
			}
			checkLines(t, "effects", effectLines(s.Effects), tc.effects)
			tok, err := DecodeToken(task.GetTaskToken())
			if err != nil || tok.GetWorkflowId() != "wf" || tok.GetActivityId() != "a" || tok.GetAttempt() != 1 || tok.GetLeaseId() != 7001 {
				t.Errorf("token %v (%v), want wf/a attempt 1 lease 7001", tok, err)
			}
			if !task.GetDeadline().AsTime().Equal(at(tc.deadline)) || task.GetMaxAttempts() != tc.max || task.GetHeartbeatTimeout().AsDuration() != tc.hb ||
				string(task.GetInput()) != "in" || task.GetIdempotencyKey() != "wf/a" || task.GetWorkflowType() != "Flow" || task.GetTaskQueue() != "q" {
				t.Errorf("task %v; want deadline %s, max attempts %d, heartbeat timeout %s", task, rel(at(tc.deadline)), tc.max, tc.hb)
			}
		})
	}
}

func TestLeaseActivityKeepsABoundedAttemptTrail(t *testing.T) {
	env := ruleSetup(t)
	env.MaxAttemptRecords = 2
	a := scheduledActivity()
	a.Info.Attempt = 3
	a.Info.Attempts = []*durablev1.AttemptRecord{{Attempt: 1}, {Attempt: 2}}
	if _, _, err := leaseActivity(a, QueueEntry{Seq: 42}, "w", r0, env); err != nil {
		t.Fatal(err)
	}
	got := a.GetInfo().GetAttempts()
	if len(got) != 2 || got[0].GetAttempt() != 2 || got[1].GetAttempt() != 3 || a.GetInfo().GetAttemptsTruncated() != 1 {
		t.Fatalf("trail %v truncated %d; want attempts 2 and 3, one let go", got, a.GetInfo().GetAttemptsTruncated())
	}
}

func TestRecordHeartbeat(t *testing.T) {
	cases := []struct {
		name     string
		hb       time.Duration
		now      time.Duration
		token    func(*durablev1.TaskToken)
		wantErr  error
		deadline time.Duration
		effects  []string
	}{
		{
			name: "KeepsDetailsAndExtendsTheHeartbeatDeadline", hb: 5 * time.Second, now: 3 * time.Second,
			deadline: 8 * time.Second, effects: []string{"set timer lease wf/a at +8s"},
		},
		{
			name: "NeverPastStartToClose", hb: 5 * time.Second, now: 28 * time.Second,
			deadline: 30 * time.Second, effects: nil,
		},
		{
			name: "WithoutHeartbeatTimeoutTheDeadlineStays", now: 3 * time.Second,
			deadline: 30 * time.Second, effects: nil,
		},
		{
			name: "StaleLeaseIsRefused", hb: 5 * time.Second, now: 3 * time.Second, wantErr: ErrStaleTask,
			token: func(t *durablev1.TaskToken) { t.LeaseId = 899 },
		},
		{
			name: "EarlierAttemptIsRefused", hb: 5 * time.Second, now: 3 * time.Second, wantErr: ErrStaleTask,
			token: func(t *durablev1.TaskToken) { t.Attempt = 1 },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := ruleSetup(t)
			a := startedActivity(2, r0)
			if tc.hb > 0 {
				a.Info.Options.HeartbeatTimeout = durationpb.New(tc.hb)
			}
			a.Info.HeartbeatDetails = []byte("old")
			tok := tokenOf(a)
			if tc.token != nil {
				tc.token(tok)
			}
			before := proto.Clone(a)
			s, err := recordHeartbeat(a, tok, []byte("page 7"), at(tc.now), env)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !proto.Equal(a, before) {
					t.Fatalf("err %v (record changed: %t), want %v and the record as it was", err, !proto.Equal(a, before), tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			in := a.GetInfo()
			if string(in.GetHeartbeatDetails()) != "page 7" || !in.GetLastHeartbeatTime().AsTime().Equal(at(tc.now)) ||
				!in.GetLeaseDeadline().AsTime().Equal(at(tc.deadline)) || in.GetState() != stateStarted {
				t.Errorf("details %q, last heartbeat %s, deadline %s; want \"page 7\", %s, %s", in.GetHeartbeatDetails(),
					rel(in.GetLastHeartbeatTime().AsTime()), rel(in.GetLeaseDeadline().AsTime()), rel(at(tc.now)), rel(at(tc.deadline)))
			}
			if s.Activity != a || s.Workflow != nil || len(s.Events) != 0 {
				t.Errorf("step writes activity %p workflow %v with %d events; want the activity alone", s.Activity, s.Workflow, len(s.Events))
			}
			checkLines(t, "effects", effectLines(s.Effects), tc.effects)
		})
	}
}

func TestCompleteActivity(t *testing.T) {
	cases := []struct {
		name    string
		wt      durablev1.WorkflowTaskState
		token   func(*durablev1.TaskToken)
		wantErr error
		events  []string
		effects []string
		dirty   bool
	}{
		{
			name: "WorkflowRunsAgain", wt: wtNone,
			events: []string{
				"8 ACTIVITY_TASK_STARTED at +0s activity a attempt 2 by w1 scheduled 5",
				"9 ACTIVITY_TASK_COMPLETED at +4s activity a by w2 scheduled 5",
				"10 WORKFLOW_TASK_SCHEDULED at +4s",
			},
			effects: []string{
				"attempt ended Work at +4s took 4s result completed failed false",
				"finish completed at +4s",
				"enqueue workflow task wf/ on wq at +4s seq 101",
			},
		},
		{
			name: "RunningWorkflowTaskIsMarkedDirty", wt: wtStarted, dirty: true,
			events: []string{
				"8 ACTIVITY_TASK_STARTED at +0s activity a attempt 2 by w1 scheduled 5",
				"9 ACTIVITY_TASK_COMPLETED at +4s activity a by w2 scheduled 5",
			},
			effects: []string{"attempt ended Work at +4s took 4s result completed failed false", "finish completed at +4s"},
		},
		{
			name: "ScheduledWorkflowTaskIsLeftAlone", wt: wtScheduled,
			events: []string{
				"8 ACTIVITY_TASK_STARTED at +0s activity a attempt 2 by w1 scheduled 5",
				"9 ACTIVITY_TASK_COMPLETED at +4s activity a by w2 scheduled 5",
			},
			effects: []string{"attempt ended Work at +4s took 4s result completed failed false", "finish completed at +4s"},
		},
		{name: "StaleLeaseIsRefused", token: func(t *durablev1.TaskToken) { t.LeaseId = 1 }, wantErr: ErrStaleTask},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := ruleSetup(t)
			a, w := startedActivity(2, r0), runningWorkflow()
			w.WtState = tc.wt
			tok := tokenOf(a)
			if tc.token != nil {
				tc.token(tok)
			}
			before := proto.Clone(a)
			s, err := completeActivity(a, w, tok, &durablev1.CompleteActivityTaskRequest{Result: []byte("ok"), Identity: "w2"}, at(4*time.Second), env)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !proto.Equal(a, before) || w.GetNextEventId() != 8 {
					t.Fatalf("err %v, want %v and the records as they were", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkLines(t, "events", eventLines(s.Events), tc.events)
			checkLines(t, "effects", effectLines(s.Effects), tc.effects)
			if string(s.Events[1].GetResult()) != "ok" {
				t.Errorf("completed event carries %q, want the result", s.Events[1].GetResult())
			}
			if s.Activity != a || s.Workflow != w || w.GetInfo().GetPendingActivities() != 0 || w.GetWtDirty() != tc.dirty ||
				w.GetInfo().GetHistoryLength() != w.GetNextEventId()-1 {
				t.Errorf("workflow %v; want it written with no pending activity, dirty %t", w, tc.dirty)
			}
			if r := a.GetInfo().GetAttempts()[0]; !r.GetEndedTime().AsTime().Equal(at(4*time.Second)) || r.GetFailure() != nil {
				t.Errorf("attempt record %v, want it ended at +4s without failure", r)
			}
		})
	}
}

func TestFailActivity(t *testing.T) {
	boom := &durablev1.Failure{Type: "Boom", Message: "it broke"}
	cases := []struct {
		name    string
		attempt int32
		failure *durablev1.Failure
		change  func(a *durablev1.ActivityRecord)
		token   func(*durablev1.TaskToken)
		wantErr error
		// the activity afterwards
		state   durablev1.ActivityState
		next    time.Duration // retries: when the next attempt is due
		lastErr string
		events  []string
		effects []string
		wfDead  int32
		wfPend  int32
	}{
		{
			name: "RetryableWithAttemptsLeftRetriesAfterJitteredBackoff", attempt: 1, failure: boom,
			state: stateRetrying, next: 4500 * time.Millisecond, lastErr: "Boom", wfPend: 1,
			effects: []string{
				"attempt ended Work at +4s took 4s result retried failed true",
				"enqueue activity wf/a on q at +4.5s seq 101",
			},
		},
		{
			name: "LaterAttemptBacksOffLonger", attempt: 2, failure: boom,
			state: stateRetrying, next: 5 * time.Second, lastErr: "Boom", wfPend: 1,
			effects: []string{
				"attempt ended Work at +4s took 4s result retried failed true",
				"enqueue activity wf/a on q at +5s seq 101",
			},
		},
		{
			name: "RetrySetsScheduleToStartButKeepsTheBudgetTimer", attempt: 1, failure: boom,
			change: func(a *durablev1.ActivityRecord) {
				a.Info.Options.ScheduleToStartTimeout = durationpb.New(10 * time.Second)
				a.Info.ExpirationTime = ts(at(time.Hour))
			},
			state: stateRetrying, next: 4500 * time.Millisecond, lastErr: "Boom", wfPend: 1,
			effects: []string{
				"attempt ended Work at +4s took 4s result retried failed true",
				"enqueue activity wf/a on q at +4.5s seq 101",
				"set timer schedule-to-start wf/a at +14.5s",
			},
		},
		{
			name: "NonRetryableFlagFailsTheActivity", attempt: 1, failure: &durablev1.Failure{Type: "Boom", NonRetryable: true},
			state: stateStarted, lastErr: "Boom", wfPend: 0,
			events: []string{
				"8 ACTIVITY_TASK_STARTED at +0s activity a attempt 1 by w1 scheduled 5",
				"9 ACTIVITY_TASK_FAILED at +4s activity a attempt 1 failure Boom scheduled 5",
				"10 WORKFLOW_TASK_SCHEDULED at +4s",
			},
			effects: []string{
				"attempt ended Work at +4s took 4s result failed failed true",
				"finish failed at +4s",
				"enqueue workflow task wf/ on wq at +4s seq 101",
			},
		},
		{
			name: "TypeListedAsNonRetryableFailsTheActivity", attempt: 1, failure: boom,
			change: func(a *durablev1.ActivityRecord) { a.Info.Options.RetryPolicy.NonRetryable = []string{"Boom"} },
			state:  stateStarted, lastErr: "Boom", wfPend: 0,
			events: []string{
				"8 ACTIVITY_TASK_STARTED at +0s activity a attempt 1 by w1 scheduled 5",
				"9 ACTIVITY_TASK_FAILED at +4s activity a attempt 1 failure Boom scheduled 5",
				"10 WORKFLOW_TASK_SCHEDULED at +4s",
			},
			effects: []string{
				"attempt ended Work at +4s took 4s result failed failed true",
				"finish failed at +4s",
				"enqueue workflow task wf/ on wq at +4s seq 101",
			},
		},
		{
			name: "AttemptsExhaustedDeadLetters", attempt: 3, failure: boom,
			state: stateDead, lastErr: "Boom", wfDead: 1, wfPend: 1,
			events: []string{"8 ACTIVITY_DEAD_LETTERED at +4s activity a attempt 3 failure Boom scheduled 5"},
			effects: []string{
				"attempt ended Work at +4s took 4s result dead_lettered failed true",
				"drop timers",
				`dead-lettered Boom operation ""`,
			},
		},
		{
			name: "BudgetEndingBeforeTheRetryDeadLetters", attempt: 1, failure: boom,
			change: func(a *durablev1.ActivityRecord) { a.Info.ExpirationTime = ts(at(4200 * time.Millisecond)) },
			state:  stateDead, lastErr: TimeoutScheduleToClose, wfDead: 1, wfPend: 1,
			events: []string{"8 ACTIVITY_DEAD_LETTERED at +4s activity a attempt 1 failure ScheduleToCloseTimeout scheduled 5"},
			effects: []string{
				"attempt ended Work at +4s took 4s result dead_lettered failed true",
				"drop timers",
				`dead-lettered ScheduleToCloseTimeout operation ""`,
			},
		},
		{
			name: "LetterOfARedriveOperationNamesIt", attempt: 3, failure: boom,
			change: func(a *durablev1.ActivityRecord) { a.Info.RedrivenByOperation = "op-3" },
			state:  stateDead, lastErr: "Boom", wfDead: 1, wfPend: 1,
			events: []string{"8 ACTIVITY_DEAD_LETTERED at +4s activity a attempt 3 failure Boom scheduled 5"},
			effects: []string{
				"attempt ended Work at +4s took 4s result dead_lettered failed true",
				"drop timers",
				`dead-lettered Boom operation "op-3"`,
			},
		},
		{name: "StaleLeaseIsRefused", attempt: 1, failure: boom, token: func(t *durablev1.TaskToken) { t.LeaseId = 5 }, wantErr: ErrStaleTask},
		{name: "EarlierAttemptIsRefused", attempt: 2, failure: boom, token: func(t *durablev1.TaskToken) { t.Attempt = 1 }, wantErr: ErrStaleTask},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := ruleSetup(t)
			a, w := startedActivity(tc.attempt, r0), runningWorkflow()
			if tc.change != nil {
				tc.change(a)
			}
			tok := tokenOf(a)
			if tc.token != nil {
				tc.token(tok)
			}
			before := proto.Clone(a)
			s, err := failActivity(a, w, tok, tc.failure, at(4*time.Second), env)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !proto.Equal(a, before) || w.GetNextEventId() != 8 {
					t.Fatalf("err %v, want %v and the records as they were", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			in := a.GetInfo()
			if in.GetState() != tc.state || in.GetLastFailure().GetType() != tc.lastErr || in.GetFailureFingerprint() == "" {
				t.Errorf("state %v, last failure %q (fingerprint %q); want %v, %q", in.GetState(), in.GetLastFailure().GetType(), in.GetFailureFingerprint(), tc.state, tc.lastErr)
			}
			switch tc.state {
			case stateRetrying:
				if in.GetAttempt() != tc.attempt+1 || !in.GetNextAttemptTime().AsTime().Equal(at(tc.next)) || in.GetLeaseDeadline() != nil || a.GetSeq() != 101 {
					t.Errorf("attempt %d due %s, lease deadline %v, seq %d; want attempt %d due %s, no lease, seq 101",
						in.GetAttempt(), rel(in.GetNextAttemptTime().AsTime()), in.GetLeaseDeadline(), a.GetSeq(), tc.attempt+1, rel(at(tc.next)))
				}
				if s.Workflow != nil {
					t.Errorf("a retry writes the workflow %v; it should leave it alone", s.Workflow)
				}
			case stateDead:
				if !in.GetDeadLetteredTime().AsTime().Equal(at(4*time.Second)) || in.GetNextAttemptTime() != nil || in.GetLeaseDeadline() != nil || in.GetAttempt() != tc.attempt {
					t.Errorf("dead letter at %v, next %v, lease %v, attempt %d; want at +4s, nothing due, attempt %d",
						in.GetDeadLetteredTime(), in.GetNextAttemptTime(), in.GetLeaseDeadline(), in.GetAttempt(), tc.attempt)
				}
			}
			if s.Activity != a {
				t.Errorf("step activity %p, want the record", s.Activity)
			}
			if tc.state != stateRetrying && (s.Workflow != w || w.GetInfo().GetDeadLetters() != tc.wfDead || w.GetInfo().GetPendingActivities() != tc.wfPend) {
				t.Errorf("workflow %v; want it written with %d dead letters, %d pending", w.GetInfo(), tc.wfDead, tc.wfPend)
			}
			if r := in.GetAttempts()[0]; !r.GetEndedTime().AsTime().Equal(at(4*time.Second)) || r.GetFailure() != tc.failure {
				t.Errorf("attempt record %v, want it ended at +4s with the reported failure", r)
			}
			checkLines(t, "events", eventLines(s.Events), tc.events)
			checkLines(t, "effects", effectLines(s.Effects), tc.effects)
		})
	}
}
