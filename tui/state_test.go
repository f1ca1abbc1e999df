package tui

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestSortedSetMatchesAFullSort(t *testing.T) {
	t.Parallel()
	type rec struct {
		id  string
		key int
	}
	less := func(a, b rec) bool {
		if a.key != b.key {
			return a.key < b.key
		}
		return a.id < b.id
	}
	s := newSortedSet(less)
	want := map[string]rec{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		id := fmt.Sprint(rng.IntN(300))
		if rng.IntN(3) == 0 {
			s.Remove(id)
			delete(want, id)
		} else {
			r := rec{id: id, key: rng.IntN(50)}
			s.Upsert(id, r)
			want[id] = r
		}
	}
	var all []rec
	for _, r := range want {
		all = append(all, r)
	}
	sort.Slice(all, func(i, j int) bool { return less(all[i], all[j]) })
	if got := s.Window(0, s.Len()); !slices.Equal(got, all) {
		t.Fatalf("order diverged from a full sort: %d vs %d records", len(got), len(all))
	}
	for i, r := range all {
		if s.Index(r.id) != i {
			t.Fatalf("Index(%s) = %d, want %d", r.id, s.Index(r.id), i)
		}
	}
}

func TestStateMovesActivitiesBetweenViews(t *testing.T) {
	t.Parallel()
	s := newState()
	s.replaceWith(fixtureActivities(), fixtureWorkflows())
	if s.attempts.set.Len() != 7 || s.dead.set.Len() != 3 || len(s.dead.groupOrder) != 2 {
		t.Fatalf("after snapshot: attempts %d dead %d groups %d", s.attempts.set.Len(), s.dead.set.Len(), len(s.dead.groupOrder))
	}
	// A redrive turns a dead letter back into a scheduled activity.
	redriven := act("order-0995", "2", "SendEmail", stScheduled, 1, 5)
	s.upsertActivities([]*durablev1.PendingActivity{redriven})
	if s.dead.set.Len() != 2 || s.deadTotal != 2 || len(s.dead.groupOrder) != 1 || s.dead.groupOrder[0].typ != "GatewayTimeout" {
		t.Fatalf("after redrive: dead %d groups %v", s.dead.set.Len(), len(s.dead.groupOrder))
	}
	s.removeActivities([]*durablev1.ActivityRef{{WorkflowId: "order-0995", ActivityId: "2"}})
	if s.attempts.set.Len() != 6 {
		t.Fatalf("after remove: attempts %d, want 6", s.attempts.set.Len())
	}
	g := s.dead.groupOrder[0]
	if got := g.firstSeen(); !got.Equal(t0.Add(-5 * time.Minute)) {
		t.Fatalf("first seen %v", got)
	}
}

func TestWaitOf(t *testing.T) {
	t.Parallel()
	withNext := func(s durablev1.ActivityState, d time.Duration) *durablev1.PendingActivity {
		a := act("w", "1", "T", s, 1, 5)
		a.NextAttemptTime = at(d)
		return a
	}
	leased := act("w", "1", "T", stStarted, 1, 5)
	leased.LeaseDeadline = at(90 * time.Second)
	expired := act("w", "1", "T", stStarted, 1, 5)
	expired.LeaseDeadline = at(-4 * time.Second)
	cases := []struct {
		name      string
		a         *durablev1.PendingActivity
		countdown string
		reason    string
	}{
		{"RetryingInBackoff", withNext(stRetrying, 4250*time.Millisecond), "4.2s", "backoff"},
		{"RetryingLong", withNext(stRetrying, 75*time.Second), "1m15s", "backoff"},
		{"JustDue", withNext(stScheduled, -time.Second), "due now", "queued"},
		{"PastDueNobodyPolls", withNext(stScheduled, -3*time.Second), "overdue 3.0s", "no worker polling"},
		{"OverdueForLong", withNext(stRetrying, -42*time.Second), "overdue 42s", "no worker polling"},
		{"LeasePastDeadline", expired, "overdue 4.0s", "lease expired"},
		{"Leased", leased, "1m30s", "lease"},
		{"DeadLetter", act("w", "1", "T", stDead, 5, 5), "", "redrive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := waitOf(c.a, t0)
			if w.countdown != c.countdown || w.reason != c.reason {
				t.Fatalf("waitOf = %q %q, want %q %q", w.countdown, w.reason, c.countdown, c.reason)
			}
		})
	}
}

func TestRetrySchedule(t *testing.T) {
	t.Parallel()
	a := act("w", "1", "T", stRetrying, 2, 5) // attempt 1 failed, 2 is due
	a.NextAttemptTime = at(2 * time.Second)
	want := "attempt 2 at +2.0s · attempt 3 at ~+4.0s · attempt 4 at ~+8.0s · attempt 5 at ~+16s · gives up after attempt 5"
	if got := retrySchedule(a, t0); got != want {
		t.Fatalf("retrySchedule =\n%q, want\n%q", got, want)
	}
}

// TestReconnectResynchronises drops the stream and checks that the console
// replaces its state with the new snapshot instead of merging the two.
func TestReconnectResynchronises(t *testing.T) {
	t.Parallel()
	fresh := act("order-2000", "1", "ShipParcel", stScheduled, 1, 5)
	fresh.NextAttemptTime = at(time.Minute)
	fake := &fakeBackend{
		scripts: []script{
			{events: snapshot(fixtureActivities(), fixtureWorkflows()), end: errors.New("daemon restarted")},
			{events: snapshot([]*durablev1.PendingActivity{fresh}, nil)},
		},
		history: fixtureHistory(),
	}
	p := Params{ReconnectDelayFunc: func(int) time.Duration { return time.Millisecond }}
	tm := teatest.NewTestModel(t, setup(t, fake, p), teatest.WithInitialTermSize(100, 30))
	waitFor(t, tm, "ShipParcel")
	// The audit log is read again on every (re)connection: what happened
	// while the stream was down is in it.
	waitUntil(t, "the audit log read twice", func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return fake.auditCalls == 2
	})
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
	if len(final.st.acts) != 1 || !final.conn.live || final.conn.failures != 0 {
		t.Fatalf("after resync: %d activities, live=%v failures=%d", len(final.st.acts), final.conn.live, final.conn.failures)
	}
}

func TestDefaultReconnectDelayIsCapped(t *testing.T) {
	t.Parallel()
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := defaultReconnectDelay(i + 1); got != w {
			t.Fatalf("delay(%d) = %v, want %v", i+1, got, w)
		}
	}
}

// TestKeysArrivingTogetherAreTakenOneByOne covers a script (or a fast typist)
// whose keys reach the program as one message of several runes.
func TestKeysArrivingTogetherAreTakenOneByOne(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	m = feed(m, snapshot(fixtureActivities(), fixtureWorkflows())...)
	next, _ := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jjj")})
	if got := next.(Model).views.attempts.cursor; got != 3 {
		t.Fatalf("cursor = %d after \"jjj\", want 3", got)
	}
}

// TestTinyTerminalsDoNotPanic renders every screen at sizes nobody should
// use, because someone will.
func TestTinyTerminalsDoNotPanic(t *testing.T) {
	t.Parallel()
	for _, size := range [][2]int{{1, 1}, {10, 3}, {20, 5}, {40, 8}} {
		for _, path := range [][]string{{}, {"2"}, {"2", "g"}, {"3"}, {"3", "enter"}, {"enter"}, {"2", "R"}, {"2", "R", "e", "INC-7"}, {"?"}, {"4"}, {"4", "enter"}, {"5"}, {"5", "enter"}, {"5", "x"}, {"5", "x", "e", "INC-7"}} {
			m := setup(t, fixtureBackend(), Params{})
			next, _ := m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
			evs := snapshot(fixtureActivities(), fixtureWorkflows())
			evs[0].Operations = fixtureOperations()
			m = feed(next.(Model), evs...)
			next, _ = m.Update(auditMsg{records: fixtureAudit()})
			m = next.(Model)
			for _, k := range path {
				m = press(m, k)
			}
			if v := m.View(); v == "" {
				t.Fatalf("%v %v: empty view", size, path)
			}
		}
	}
}
