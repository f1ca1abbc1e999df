package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// What the table tests of the rules share: a start time, an environment
// whose jitter, ids and lease ids are known, records to begin from, and
// effects and events written out as lines a case can list exactly.

var r0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// at is r0 plus d.
func at(d time.Duration) time.Time { return r0.Add(d) }

// ruleSetup returns an environment whose jitter halves every backoff, whose
// sequence numbers count from 101 and whose lease ids count from 7001.
func ruleSetup(t *testing.T) *ruleEnv {
	t.Helper()
	return &ruleEnv{
		Defaults:            PolicyDefaults{MaxAttempts: 5, StartToClose: 10 * time.Minute},
		MaxAttemptRecords:   100,
		WorkflowTaskTimeout: 10 * time.Second,
		Draw:                &countingDraw{next: 100, lease: 7000},
	}
}

// countingDraw halves every backoff and counts ids up.
type countingDraw struct{ next, lease int64 }

func (d *countingDraw) Jitter(b time.Duration) time.Duration { return b / 2 }
func (d *countingDraw) NextID() int64                        { d.next++; return d.next }
func (d *countingDraw) LeaseID() int64                       { d.lease++; return d.lease }

// scheduledActivity is activity "a" of workflow "wf", attempt 1 of 3, due at
// r0, with a 30 s start-to-close timeout and a backoff of 1 s doubling.
func scheduledActivity() *durablev1.ActivityRecord {
	return &durablev1.ActivityRecord{
		Info: &durablev1.PendingActivity{
			WorkflowId: "wf", ActivityId: "a", ActivityType: "Work", TaskQueue: "q",
			State: stateScheduled, Attempt: 1, MaxAttempts: 3,
			ScheduledTime: ts(r0), NextAttemptTime: ts(r0), IdempotencyKey: "wf/a",
			Options: &durablev1.ActivityOptions{
				TaskQueue: "q", StartToCloseTimeout: durationpb.New(30 * time.Second),
				RetryPolicy: &durablev1.RetryPolicy{InitialMs: 1000, Backoff: 2, MaxAttempts: 3},
			},
		},
		Input: []byte("in"), ScheduledEventId: 5, WorkflowType: "Flow", Seq: 42,
	}
}

// startedActivity is scheduledActivity's attempt n, leased at start by
// worker "w1" under lease 900, its lease deadline 30 s on.
func startedActivity(n int32, start time.Time) *durablev1.ActivityRecord {
	a := scheduledActivity()
	in := a.Info
	in.Attempt = n
	in.State = stateStarted
	in.NextAttemptTime = nil
	in.LastStartedTime = ts(start)
	in.LastWorkerIdentity = "w1"
	in.LeaseDeadline = ts(start.Add(30 * time.Second))
	in.Attempts = []*durablev1.AttemptRecord{{Attempt: n, Identity: "w1", StartedTime: ts(start)}}
	a.LeaseId = 900
	return a
}

// tokenOf is the token of a's lease.
func tokenOf(a *durablev1.ActivityRecord) *durablev1.TaskToken {
	return &durablev1.TaskToken{WorkflowId: "wf", ActivityId: "a", Attempt: a.GetInfo().GetAttempt(), LeaseId: a.GetLeaseId()}
}

// runningWorkflow is workflow "wf" on queue "wq" with one pending activity,
// seven events in its history and no workflow task.
func runningWorkflow() *durablev1.WorkflowRecord {
	return &durablev1.WorkflowRecord{
		Info: &durablev1.WorkflowInfo{
			WorkflowId: "wf", WorkflowType: "Flow", TaskQueue: "wq", Status: statusRunning,
			StartTime: ts(r0.Add(-time.Minute)), PendingActivities: 1, HistoryLength: 7,
		},
		NextEventId: 8, WtState: wtNone,
	}
}

// rel writes t relative to r0.
func rel(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := t.Sub(r0)
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

var timerNames = map[TimerKind]string{
	ActivityLeaseTimer: "lease", ScheduleToStartTimer: "schedule-to-start", ScheduleToCloseTimer: "schedule-to-close",
	WorkflowTaskLeaseTimer: "workflow-task-lease", UserTimer: "user",
}

func timerLine(t Timer) string {
	return fmt.Sprintf("%s %s/%s at %s", timerNames[t.Kind], t.WorkflowID, t.ID, rel(t.Due))
}

// effectLines writes effects one a line.
func effectLines(effs []effect) []string {
	out := []string{}
	for _, ef := range effs {
		var l string
		switch ef.kind {
		case effEnqueue:
			kind := "activity"
			if ef.entry.Kind == WorkflowTask {
				kind = "workflow task"
			}
			l = fmt.Sprintf("enqueue %s %s/%s on %s at %s seq %d", kind, ef.entry.WorkflowID, ef.entry.ActivityID, ef.entry.Queue, rel(ef.entry.Due), ef.entry.Seq)
		case effSetTimer:
			l = "set timer " + timerLine(ef.timer)
		case effTimerMovedLater:
			l = "move timer " + timerLine(ef.timer)
		case effDropTimers:
			l = "drop timers"
		case effObserve:
			switch ef.obs.kind {
			case obsStarted:
				l = fmt.Sprintf("observe started %s attempt %d waited %s", ef.obs.activityType, ef.obs.attempt, ef.obs.d)
			case obsTimedOut:
				l = fmt.Sprintf("observe timed out %s %s", ef.obs.activityType, ef.obs.timeout)
			case obsRedriven:
				l = "observe redriven " + ef.obs.activityType
			default:
				l = fmt.Sprintf("observe %d", ef.obs.kind)
			}
		case effAttemptEnded:
			l = fmt.Sprintf("attempt ended %s at %s took %s result %s failed %t", ef.obs.activityType, rel(ef.at), ef.obs.d, ef.obs.result, ef.failed)
		case effFinish:
			l = fmt.Sprintf("finish %s at %s", ef.outcome, rel(ef.at))
		case effDeadLettered:
			l = fmt.Sprintf("dead-lettered %s operation %q", ef.failure.GetType(), ef.operation)
		case effDeleteTimer:
			l = fmt.Sprintf("delete user timer %s/%s", ef.timer.WorkflowID, ef.timer.ID)
		case effCloseWorkflow:
			l = fmt.Sprintf("close workflow at %s", rel(ef.at))
		default:
			l = fmt.Sprintf("effect %d", ef.kind)
		}
		out = append(out, l)
	}
	return out
}

// eventLines writes events one a line: id, type, time and what they are
// about.
func eventLines(evs []*durablev1.HistoryEvent) []string {
	out := []string{}
	for _, ev := range evs {
		l := fmt.Sprintf("%d %s at %s", ev.GetEventId(), strings.TrimPrefix(ev.GetType().String(), "EVENT_TYPE_"), rel(ev.GetTime().AsTime()))
		if ev.GetActivityId() != "" {
			l += " activity " + ev.GetActivityId()
		}
		if ev.GetTimerId() != "" {
			l += " timer " + ev.GetTimerId()
		}
		if ev.GetAttempt() != 0 {
			l += fmt.Sprintf(" attempt %d", ev.GetAttempt())
		}
		if ev.GetIdentity() != "" {
			l += " by " + ev.GetIdentity()
		}
		if ev.GetFailure() != nil {
			l += " failure " + ev.GetFailure().GetType()
		}
		if ev.GetScheduledEventId() != 0 {
			l += fmt.Sprintf(" scheduled %d", ev.GetScheduledEventId())
		}
		out = append(out, l)
	}
	return out
}

// checkLines fails the test when got and want differ, showing both whole.
func checkLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}
