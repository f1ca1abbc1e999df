package engine

import (
	"testing"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// oneActivityTx is a Tx holding one activity; any write panics (the nil
// embedded Tx), which is what a timer that must do nothing but move is
// checked with.
type oneActivityTx struct {
	Tx
	a *durablev1.ActivityRecord
}

func (t oneActivityTx) GetActivity(workflowID, activityID string) (*durablev1.ActivityRecord, error) {
	return t.a, nil
}

// TestFireMovesATimerAnOverrideMadeLater: a lease or budget timer that comes
// due before the time the policy in force gives (an override lengthened it
// after the timer was set) ends nothing and sets itself again at that time.
func TestFireMovesATimerAnOverrideMadeLater(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		state durablev1.ActivityState
		kind  TimerKind
		patch *durablev1.OptionsPatch
		want  time.Duration
	}{
		{"Lease", stateStarted, ActivityLeaseTimer, &durablev1.OptionsPatch{StartToCloseTimeout: durationpb.New(time.Hour)}, time.Hour},
		{"Budget", stateRetrying, ScheduleToCloseTimer, &durablev1.OptionsPatch{ScheduleToCloseTimeout: durationpb.New(2 * time.Hour)}, 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := &Engine{opts: Options{}.withDefaults()}
			e.rt = &embedded{e: e}
			table := overrideTable(nil).with([]*durablev1.PolicyOverride{{ActivityType: "Charge", Patch: tt.patch}})
			e.overrides.Store(&table)
			a := &durablev1.ActivityRecord{Info: &durablev1.PendingActivity{
				WorkflowId: "wf", ActivityId: "1", ActivityType: "Charge", State: tt.state, Attempt: 1, MaxAttempts: 3,
				ScheduledTime: ts(t0), LastStartedTime: ts(t0),
				Options: &durablev1.ActivityOptions{StartToCloseTimeout: durationpb.New(time.Minute)},
			}}
			if tt.kind == ScheduleToCloseTimer {
				a.Info.Options.ScheduleToCloseTimeout = durationpb.New(time.Minute)
				a.Info.ExpirationTime = ts(t0.Add(time.Minute))
			}
			due := t0.Add(time.Minute)
			var c change
			if err := e.fire(oneActivityTx{a: a}, &c, Timer{Due: due, Kind: tt.kind, WorkflowID: "wf", ID: "1"}, due); err != nil {
				t.Fatal(err)
			}
			want := Timer{Due: t0.Add(tt.want), Kind: tt.kind, WorkflowID: "wf", ID: "1"}
			if len(c.timers) != 1 || !c.timers[0].Due.Equal(want.Due) || c.timers[0].Kind != want.Kind {
				t.Errorf("timers set = %+v, want %+v", c.timers, want)
			}
		})
	}
}
