package tui

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// timeoutLetters are two letters of Timeout and three of HeartbeatTimeout,
// whose name contains the other's: the case a substring filter gets wrong.
func timeoutLetters() (all []*durablev1.PendingActivity, timeouts []ref) {
	for i, typ := range []string{"Timeout", "HeartbeatTimeout", "Timeout", "HeartbeatTimeout", "HeartbeatTimeout"} {
		a := act(fmt.Sprintf("order-%d", i), "1", "ChargeCard", stDead, 5, 5)
		a.DeadLetteredTime = at(-time.Duration(10-i) * time.Minute)
		a.LastFailure = fail(typ, "no answer in time")
		all = append(all, a)
		if typ == "Timeout" {
			timeouts = append(timeouts, refOf(a))
		}
	}
	slices.Reverse(timeouts) // the view shows the newest first
	return all, timeouts
}

// TestGroupSelectsExactlyItsLetters: opening the group "Timeout (2)" shows
// its two letters under the exact filter type:Timeout (not the three
// HeartbeatTimeout ones), and R redrives those two and nothing else, after a
// dialog that names the filter and the count.
func TestGroupSelectsExactlyItsLetters(t *testing.T) {
	t.Parallel()
	letters, timeouts := timeoutLetters()
	fake := &fakeBackend{scripts: []script{{events: snapshot(letters, nil)}}}
	tm := teatest.NewTestModel(t, setup(t, fake, Params{}), teatest.WithInitialTermSize(100, 30))
	waitFor(t, tm, "order-4")
	// Groups go largest first: HeartbeatTimeout (3), then Timeout (2).
	for _, k := range keys("2", "g", "j", "enter") {
		tm.Send(k)
	}
	waitFor(t, tm, "filter type:Timeout — 2 shown")
	tm.Send(keys("R")[0])
	// The dialog names the count and the filter, in one frame.
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		return bytes.Contains(b, []byte("Redrive 2 dead letters?")) && bytes.Contains(b, []byte("filter type:Timeout"))
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
	tm.Send(keys("y")[0])
	waitFor(t, tm, "op-7 redriving")
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second))
	calls := fake.bulkCalls()
	if len(calls) != 1 || !slices.Equal(calls[0].refs, timeouts) {
		t.Fatalf("redrove %v, want exactly the Timeout letters %v", calls, timeouts)
	}
}

// TestFilterBarReadsTheSelection: the words typed are read as a selection;
// one that does not read names itself, keeps the list as it was and keeps
// the bar open on enter.
func TestFilterBarReadsTheSelection(t *testing.T) {
	t.Parallel()
	letters, _ := timeoutLetters()
	m := setup(t, &fakeBackend{}, Params{})
	m = m.apply(snapshot(letters, nil)[0]).apply(snapshot(letters, nil)[1])
	m, _ = m.show(screenDeadLetters)
	m.filtering = true
	m.input.Focus()

	m = m.setFilter("fail:HeartbeatTimeout  act:ChargeCard")
	if got, want := m.filterCanonical(), "type:HeartbeatTimeout act:ChargeCard"; got != want {
		t.Errorf("canonical = %q, want %q", got, want)
	}
	if n := m.listLen(); n != 3 {
		t.Errorf("%d shown, want 3", n)
	}
	m = m.setFilter("type:HeartbeatTimeout attempt>=")
	if m.filterErr == "" || m.listLen() != 3 {
		t.Errorf("a bad word: error %q, %d shown; want an error and the 3 of before", m.filterErr, m.listLen())
	}
	next, _ := m.filterKey(tea.KeyMsg{Type: tea.KeyEnter})
	if !next.(Model).filtering {
		t.Error("enter closed the bar on words that do not read")
	}
	m = m.setFilter("state:running")
	if m.filterErr == "" {
		t.Error("state:running on the dead letters is not refused")
	}
}

// TestNoPollerFilterFollowsTheClock: nopoller keeps the activities due for
// more than client.NoPollerAfter, and one becomes stuck as the clock moves,
// with no event saying so.
func TestNoPollerFilterFollowsTheClock(t *testing.T) {
	t.Parallel()
	fresh := act("order-2000", "1", "ChargeCard", stScheduled, 1, 5)
	fresh.ScheduledTime = at(-time.Second)
	acts := append(fixtureActivities(), fresh)
	m := setup(t, &fakeBackend{}, Params{})
	m = m.apply(snapshot(acts, nil)[0]).apply(snapshot(acts, nil)[1])
	m = m.setFilter("nopoller")
	if n := m.listLen(); n != 1 {
		t.Fatalf("nopoller shows %d, want the one due for a minute", n)
	}
	next, _ := m.Update(tickMsg{now: t0.Add(2 * time.Second)})
	if n := next.(Model).listLen(); n != 2 {
		t.Fatalf("nopoller 2s later shows %d, want 2", n)
	}
}

// TestNoPollerFilterFollowsTheDaemonsQueues: once the daemon has sent its
// task queues, nopoller is its rule, as in wf: a due activity on a queue
// with a parked poller is not selected, one on a queue nobody polls is, and
// a poller arriving takes it out. Without the list it is the wait rule.
func TestNoPollerFilterFollowsTheDaemonsQueues(t *testing.T) {
	t.Parallel()
	polled := act("order-3000", "1", "ChargeCard", stScheduled, 1, 5)
	unpolled := act("order-3001", "1", "ChargeCard", stScheduled, 1, 5)
	unpolled.TaskQueue = "orders-eu"
	for _, a := range []*durablev1.PendingActivity{polled, unpolled} {
		a.ScheduledTime, a.NextAttemptTime = at(-time.Second), at(-time.Second)
	}
	acts := []*durablev1.PendingActivity{polled, unpolled}

	without := feed(setup(t, &fakeBackend{}, Params{}), snapshot(acts, nil)...).setFilter("nopoller")
	if n := without.listLen(); n != 0 {
		t.Fatalf("without the queue list nopoller shows %d, want none due for more than %v", n, client.NoPollerAfter)
	}

	evs := snapshot(acts, nil)
	evs[1].TaskQueues = fixtureQueues()
	m := feed(setup(t, &fakeBackend{}, Params{}), evs...).setFilter("nopoller")
	if rows := homeRows(m); len(rows) != 1 || rows[0] != "order-3001/1" {
		t.Fatalf("nopoller shows %v, want only the activity on the queue nobody polls", rows)
	}

	queues := fixtureQueues().GetTaskQueues()
	queues[2].Pollers = []*durablev1.Poller{{Identity: "worker-c", Kind: durablev1.TaskKind_TASK_KIND_ACTIVITY,
		LastPollTime: at(0), Parked: true}}
	m = feed(m, queueUpsert(queues...))
	if rows := homeRows(m); len(rows) != 0 {
		t.Fatalf("after a poller came nopoller shows %v, want none", rows)
	}
}
