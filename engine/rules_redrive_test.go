package engine

import (
	"errors"
	"testing"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// deadLetterRecord is scheduledActivity dead-lettered at its third attempt,
// with a one-minute schedule-to-close budget long spent and a checkpoint.
func deadLetterRecord() *durablev1.ActivityRecord {
	a := scheduledActivity()
	in := a.Info
	in.State, in.Attempt, in.NextAttemptTime = stateDead, 3, nil
	in.DeadLetteredTime = ts(at(-time.Hour))
	in.Options.ScheduleToCloseTimeout = durationpb.New(time.Minute)
	in.ExpirationTime = ts(at(-time.Hour))
	in.HeartbeatDetails = []byte("page 7")
	in.LastFailure = &durablev1.Failure{Type: "Boom"}
	return a
}

func TestRedriveLetter(t *testing.T) {
	cases := []struct {
		name      string
		change    func(*durablev1.ActivityRecord)
		edit      *durablev1.OptionsPatch
		operation string
		wantErr   error
		max       int32
		stc       time.Duration // the start-to-close timeout afterwards
		effects   []string
	}{
		{
			name: "LetterGoesBackAsAttemptOneWithAFreshBudget", max: 3, stc: 30 * time.Second,
			effects: []string{
				"enqueue activity wf/a on q at +0s seq 101",
				"set timer schedule-to-close wf/a at +1m0s",
				"observe redriven Work",
			},
		},
		{
			name: "EditChangesTheOptionsAndWhatFollowsFromThem", max: 10, stc: 45 * time.Second,
			edit: &durablev1.OptionsPatch{MaxAttempts: proto.Int32(10), StartToCloseTimeout: durationpb.New(45 * time.Second)},
			effects: []string{
				"enqueue activity wf/a on q at +0s seq 101",
				"set timer schedule-to-close wf/a at +1m0s",
				"observe redriven Work",
			},
		},
		{
			name: "EditClearingLimitsFallsBackToTheDefaults", max: 5, stc: time.Minute,
			edit: &durablev1.OptionsPatch{MaxAttempts: proto.Int32(0), StartToCloseTimeout: durationpb.New(0)},
			effects: []string{
				"enqueue activity wf/a on q at +0s seq 101",
				"set timer schedule-to-close wf/a at +1m0s",
				"observe redriven Work",
			},
		},
		{
			name: "OperationIsNamedOnTheLetter", max: 3, stc: 30 * time.Second, operation: "op-9",
			effects: []string{
				"enqueue activity wf/a on q at +0s seq 101",
				"set timer schedule-to-close wf/a at +1m0s",
				"observe redriven Work",
			},
		},
		{
			name: "LetterWithoutBudgetGetsNone", max: 3, stc: 30 * time.Second,
			change:  func(a *durablev1.ActivityRecord) { a.Info.Options.ScheduleToCloseTimeout = nil },
			effects: []string{"enqueue activity wf/a on q at +0s seq 101", "observe redriven Work"},
		},
		{
			name: "ActivityNotDeadLetteredIsRefused", wantErr: ErrNotDeadLettered,
			change: func(a *durablev1.ActivityRecord) { a.Info.State = stateRetrying },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := ruleSetup(t)
			a, w := deadLetterRecord(), runningWorkflow()
			w.Info.DeadLetters = 1
			if tc.change != nil {
				tc.change(a)
			}
			before := proto.Clone(a)
			p := redriveParams{workflowID: "wf", activityID: "a", by: Actor{Principal: "ops"}, reason: "fixed", edit: tc.edit, operationID: tc.operation, now: r0}
			s, err := redriveLetter(a, w, p, env)
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
			wantExp := tc.change == nil
			if in.GetState() != stateScheduled || in.GetAttempt() != 1 || !in.GetScheduledTime().AsTime().Equal(r0) || !in.GetNextAttemptTime().AsTime().Equal(r0) ||
				in.GetDeadLetteredTime() != nil || in.GetRedrives() != 1 || in.GetRedrivenByOperation() != tc.operation || a.GetSeq() != 101 ||
				string(in.GetHeartbeatDetails()) != "page 7" || (in.GetExpirationTime() != nil) != wantExp ||
				(wantExp && !in.GetExpirationTime().AsTime().Equal(at(time.Minute))) {
				t.Errorf("letter after the redrive: %v", in)
			}
			if in.GetMaxAttempts() != tc.max || in.GetOptions().GetStartToCloseTimeout().AsDuration() != tc.stc {
				t.Errorf("max attempts %d, start-to-close %s; want %d, %s", in.GetMaxAttempts(), in.GetOptions().GetStartToCloseTimeout().AsDuration(), tc.max, tc.stc)
			}
			if s.Activity != a || s.Workflow != w || w.GetInfo().GetDeadLetters() != 0 {
				t.Errorf("step writes %p and %v; want the letter and its workflow with no dead letter left", s.Activity, w.GetInfo())
			}
			checkLines(t, "events", eventLines(s.Events), []string{"8 ACTIVITY_REDRIVEN at +0s activity a scheduled 5"})
			if ev := s.Events[0]; ev.GetPrincipal() != "ops" || ev.GetReason() != "fixed" || ev.GetOperationId() != tc.operation ||
				!proto.Equal(ev.GetEdit(), tc.edit) || (tc.edit != nil && ev.GetEdit() == tc.edit) {
				t.Errorf("event %v; want principal ops, reason fixed, operation %q and a copy of the edit", ev, tc.operation)
			}
			checkLines(t, "effects", effectLines(s.Effects), tc.effects)
		})
	}
}
