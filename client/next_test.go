package client_test

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

var nextNow = time.Date(2026, 1, 1, 6, 14, 5, 0, time.UTC)

func nextAt(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(nextNow.Add(d)) }

func pending(state durablev1.ActivityState, attempt, maxAttempts int32) *durablev1.PendingActivity {
	return &durablev1.PendingActivity{WorkflowId: "w", ActivityId: "1", State: state, Attempt: attempt, MaxAttempts: maxAttempts}
}

func TestNextOfSaysWhatAnActivityWaitsOnAndForHowLong(t *testing.T) {
	t.Parallel()
	const (
		scheduled = durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED
		retrying  = durablev1.ActivityState_ACTIVITY_STATE_RETRYING
		started   = durablev1.ActivityState_ACTIVITY_STATE_STARTED
		dead      = durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED
	)
	with := func(state durablev1.ActivityState, set func(a *durablev1.PendingActivity)) *durablev1.PendingActivity {
		a := pending(state, 2, 5)
		set(a)
		return a
	}
	next := func(d time.Duration) func(*durablev1.PendingActivity) {
		return func(a *durablev1.PendingActivity) { a.NextAttemptTime = nextAt(d) }
	}
	lease := func(d time.Duration) func(*durablev1.PendingActivity) {
		return func(a *durablev1.PendingActivity) { a.LeaseDeadline = nextAt(d) }
	}
	cases := []struct {
		name        string
		a           *durablev1.PendingActivity
		kind        client.NextKind
		at          time.Duration // from now; ignored when zeroAt
		zeroAt      bool
		left        time.Duration
		overdueFrom time.Duration // from now; ignored when noOverdue
		noOverdue   bool
	}{
		{"RetryInBackoff", with(retrying, next(4250*time.Millisecond)), client.NextBackoff, 4250 * time.Millisecond, false, 4250 * time.Millisecond, 4250*time.Millisecond + client.NoPollerAfter, false},
		{"FirstAttemptScheduledLater", with(scheduled, next(time.Minute)), client.NextBackoff, time.Minute, false, time.Minute, time.Minute + client.NoPollerAfter, false},
		{"DueThisInstant", with(scheduled, next(0)), client.NextDue, 0, false, 0, client.NoPollerAfter, false},
		{"DueWithinTheHandOff", with(retrying, next(-time.Second)), client.NextDue, -time.Second, false, -time.Second, time.Second, false},
		{"DueExactlyNoPollerAfter", with(scheduled, next(-client.NoPollerAfter)), client.NextDue, -client.NoPollerAfter, false, -client.NoPollerAfter, 0, false},
		{"OverdueJustPastNoPollerAfter", with(scheduled, next(-client.NoPollerAfter-time.Millisecond)), client.NextOverdue, -client.NoPollerAfter - time.Millisecond, false, -client.NoPollerAfter - time.Millisecond, -time.Millisecond, false},
		{"RetryOverdueForLong", with(retrying, next(-42*time.Second)), client.NextOverdue, -42 * time.Second, false, -42 * time.Second, -40 * time.Second, false},
		{"FirstAttemptFallsBackOnScheduledTime", with(scheduled, func(a *durablev1.PendingActivity) { a.ScheduledTime = nextAt(-3 * time.Second) }), client.NextOverdue, -3 * time.Second, false, -3 * time.Second, -time.Second, false},
		{"QueuedWithoutATime", with(scheduled, func(*durablev1.PendingActivity) {}), client.NextDue, 0, true, 0, 0, true},
		{"Running", with(started, lease(90*time.Second)), client.NextRunning, 90 * time.Second, false, 90 * time.Second, 90 * time.Second, false},
		{"LeaseEndsThisInstant", with(started, lease(0)), client.NextRunning, 0, false, 0, 0, false},
		{"LeaseExpired", with(started, lease(-4*time.Second)), client.NextLeaseExpired, -4 * time.Second, false, -4 * time.Second, -4 * time.Second, false},
		{"RunningWithoutADeadline", with(started, func(*durablev1.PendingActivity) {}), client.NextRunning, 0, true, 0, 0, true},
		{"DeadLettered", with(dead, func(a *durablev1.PendingActivity) { a.DeadLetteredTime = nextAt(-90 * time.Second) }), client.NextDeadLettered, -90 * time.Second, false, -90 * time.Second, 0, true},
		{"UnknownState", pending(durablev1.ActivityState_ACTIVITY_STATE_UNSPECIFIED, 1, 5), "", 0, true, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			n := client.NextOf(c.a, nextNow)
			wantAt := time.Time{}
			if !c.zeroAt {
				wantAt = nextNow.Add(c.at)
			}
			wantOverdue := time.Time{}
			if !c.noOverdue {
				wantOverdue = nextNow.Add(c.overdueFrom)
			}
			if n.Kind != c.kind || !n.At.Equal(wantAt) || n.Left != c.left || !n.OverdueFrom.Equal(wantOverdue) {
				t.Fatalf("NextOf = {%q at %v left %v overdue from %v}, want {%q at %v left %v overdue from %v}",
					n.Kind, n.At, n.Left, n.OverdueFrom, c.kind, wantAt, c.left, wantOverdue)
			}
			if got, want := n.Late(), max(-c.left, 0); got != want {
				t.Errorf("Late = %v, want %v", got, want)
			}
			if got, want := n.Overdue(), c.kind == client.NextOverdue || c.kind == client.NextLeaseExpired; got != want {
				t.Errorf("Overdue = %v, want %v", got, want)
			}
			if got, want := client.WaitsOnPoller(c.a, nextNow), c.kind == client.NextOverdue; got != want {
				t.Errorf("WaitsOnPoller = %v, want %v", got, want)
			}
			if at, ok := client.OverdueFrom(c.a); ok == c.noOverdue || !at.Equal(wantOverdue) {
				t.Errorf("OverdueFrom = %v %v, want %v %v", at, ok, wantOverdue, !c.noOverdue)
			}
		})
	}
}

func TestDueTimeIsTheNextAttemptElseTheScheduledTime(t *testing.T) {
	t.Parallel()
	a := pending(durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, 1, 5)
	if _, ok := client.DueTime(a); ok {
		t.Fatal("DueTime without times: ok, want not")
	}
	a.ScheduledTime = nextAt(-time.Minute)
	if due, ok := client.DueTime(a); !ok || !due.Equal(nextNow.Add(-time.Minute)) {
		t.Fatalf("DueTime = %v %v, want the scheduled time", due, ok)
	}
	a.NextAttemptTime = nextAt(time.Second)
	if due, ok := client.DueTime(a); !ok || !due.Equal(nextNow.Add(time.Second)) {
		t.Fatalf("DueTime = %v %v, want the next attempt time", due, ok)
	}
}

// tenths writes spans as the console does, so the expectations read as the
// detail pane does.
func tenths(d time.Duration) string {
	if d < 10*time.Second {
		return strconv.FormatFloat(float64(d/(100*time.Millisecond))/10, 'f', 1, 64) + "s"
	}
	return strconv.Itoa(int(d/time.Second)) + "s"
}

func TestRetryScheduleUnderFixedTimes(t *testing.T) {
	t.Parallel()
	const (
		retrying = durablev1.ActivityState_ACTIVITY_STATE_RETRYING
		started  = durablev1.ActivityState_ACTIVITY_STATE_STARTED
	)
	policy := &durablev1.RetryPolicy{InitialMs: 1200, Backoff: 2, MaxIntervalMs: 60_000}
	with := func(state durablev1.ActivityState, attempt, maxAttempts int32, set func(a *durablev1.PendingActivity)) *durablev1.PendingActivity {
		a := pending(state, attempt, maxAttempts)
		a.Options = &durablev1.ActivityOptions{RetryPolicy: policy}
		set(a)
		return a
	}
	due := func(d time.Duration) func(*durablev1.PendingActivity) {
		return func(a *durablev1.PendingActivity) { a.NextAttemptTime = nextAt(d) }
	}
	cases := []struct {
		name string
		a    *durablev1.PendingActivity
		want string
		last []client.PlannedAttempt // the last planned attempts, checked as data
	}{
		{"RetryingWithEveryAttemptShown", with(retrying, 3, 5, due(1200*time.Millisecond)),
			// Backoff after attempt 3 is 1.2s×2² = 4.8s, after 4, 9.6s.
			"attempt 3 at +1.2s · attempt 4 at ~+6.0s · attempt 5 at ~+15s · gives up after attempt 5",
			[]client.PlannedAttempt{{Attempt: 3, After: 1200 * time.Millisecond}, {Attempt: 4, After: 6 * time.Second, Bound: true}, {Attempt: 5, After: 15600 * time.Millisecond, Bound: true}}},
		{"LongScheduleIsCut", with(retrying, 2, 20, due(0)),
			"attempt 2 at +0.0s · attempt 3 at ~+2.4s · attempt 4 at ~+7.2s · attempt 5 at ~+16s · attempt 6 at ~+36s · attempt 7 at ~+74s · … · gives up after attempt 20",
			[]client.PlannedAttempt{{Attempt: 7, After: 74400 * time.Millisecond, Bound: true}}},
		{"DueAttemptAlreadyPassedCountsFromNow", with(retrying, 4, 5, due(-3*time.Second)),
			"attempt 4 at +0.0s · attempt 5 at ~+9.6s · gives up after attempt 5", nil},
		{"RunningCountsFromItsFailure", with(started, 4, 6, func(a *durablev1.PendingActivity) { a.LeaseDeadline = nextAt(time.Minute) }),
			"if attempt 4 fails: · attempt 5 at ~+9.6s · attempt 6 at ~+28s · gives up after attempt 6", nil},
		{"RunningTheLastAttempt", with(started, 5, 5, func(*durablev1.PendingActivity) {}),
			"if attempt 5 fails: · gives up after attempt 5", nil},
		{"OptionsInForceWinOverTheCode", with(retrying, 1, 3, func(a *durablev1.PendingActivity) {
			a.NextAttemptTime = nextAt(500 * time.Millisecond)
			a.OptionsInForce = &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{InitialMs: 100, Backoff: 3}}
		}), "attempt 1 at +0.5s · attempt 2 at ~+0.6s · attempt 3 at ~+0.9s · gives up after attempt 3", nil},
		{"OverrideBelowTheAttemptReachedGivesUpAfterIt", with(retrying, 6, 3, due(2*time.Second)),
			"attempt 6 at +2.0s · gives up after attempt 6", nil},
		{"DeadLettered", with(durablev1.ActivityState_ACTIVITY_STATE_DEAD_LETTERED, 5, 5, func(*durablev1.PendingActivity) {}),
			"gave up after attempt 5; a redrive starts again at attempt 1", nil},
		{"NoMaxAttempts", with(retrying, 2, 0, due(time.Second)), "unknown: no max attempts", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := client.RetryScheduleOf(c.a, nextNow)
			if got := s.Words(tenths); got != c.want {
				t.Fatalf("Words =\n%q, want\n%q", got, c.want)
			}
			if got := s.Known(); got != (c.name != "NoMaxAttempts") {
				t.Errorf("Known = %v", got)
			}
			if c.last != nil {
				got := s.Attempts[len(s.Attempts)-len(c.last):]
				for i := range c.last {
					if got[i] != c.last[i] {
						t.Errorf("planned attempt %d = %+v, want %+v", i, got[i], c.last[i])
					}
				}
			}
		})
	}
}
