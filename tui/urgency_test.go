package tui

import (
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// urgencyFixture is one of each kind of row, named by what it is, on the
// clock t0.
func urgencyFixture() map[string]*durablev1.PendingActivity {
	waiting := func(wf string, s durablev1.ActivityState, attempt int32, due time.Duration) *durablev1.PendingActivity {
		a := act(wf, "1", "Charge", s, attempt, 5)
		a.NextAttemptTime = at(due)
		return a
	}
	running := func(wf string, deadline time.Duration) *durablev1.PendingActivity {
		a := act(wf, "1", "Copy", stStarted, 1, 5)
		a.LeaseDeadline = at(deadline)
		return a
	}
	dead := func(wf string, ago time.Duration) *durablev1.PendingActivity {
		a := act(wf, "1", "Email", stDead, 5, 5)
		a.DeadLetteredTime = at(-ago)
		return a
	}
	return map[string]*durablev1.PendingActivity{
		"nobody-polls-42s":   waiting("a-nobody", stScheduled, 1, -42*time.Second),
		"nobody-polls-5s":    waiting("b-nobody", stRetrying, 2, -5*time.Second),
		"lease-expired":      running("c-lease", -time.Second),
		"dead-new":           dead("d-dead", time.Minute),
		"dead-old":           dead("e-dead", time.Hour),
		"retry-4":            waiting("f-retry", stRetrying, 4, 3*time.Second),
		"retry-2":            waiting("a-retry", stRetrying, 2, time.Second),
		"retry-2-due-now":    waiting("b-retry", stRetrying, 2, -time.Second),
		"running-a":          running("a-run", time.Minute),
		"running-b":          running("b-run", 10*time.Second),
		"scheduled-later":    waiting("a-sched", stScheduled, 1, time.Hour),
		"scheduled-just-due": waiting("b-sched", stScheduled, 1, -time.Second),
	}
}

func TestUrgencyOf(t *testing.T) {
	t.Parallel()
	rows := urgencyFixture()
	want := map[string]urgency{
		"nobody-polls-42s": urgencyOverdue, "nobody-polls-5s": urgencyOverdue, "lease-expired": urgencyOverdue,
		"dead-new": urgencyDead, "dead-old": urgencyDead,
		"retry-4": urgencyRetrying, "retry-2": urgencyRetrying, "retry-2-due-now": urgencyRetrying,
		"running-a": urgencyRunning, "running-b": urgencyRunning,
		"scheduled-later": urgencyScheduled, "scheduled-just-due": urgencyScheduled,
	}
	for name, a := range rows {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := urgencyOf(a, t0); got != want[name] {
				t.Fatalf("urgencyOf = %d, want %d", got, want[name])
			}
		})
	}
}

// TestHomeOrderUnderEverySortKey sorts the same rows on a fixed clock by each
// key.
func TestHomeOrderUnderEverySortKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key  sortKey
		want []string
	}{
		{sortUrgency, []string{
			"nobody-polls-42s", "nobody-polls-5s", "lease-expired", // longest overdue first
			"dead-new", "dead-old", // newest dead letter first
			"retry-4", "retry-2", "retry-2-due-now", // higher attempt first, then workflow id
			"running-a", "running-b",
			"scheduled-later", "scheduled-just-due",
		}},
		{sortWorkflow, []string{
			"nobody-polls-42s", "retry-2", "running-a", "scheduled-later", "nobody-polls-5s", "retry-2-due-now",
			"running-b", "scheduled-just-due", "lease-expired", "dead-new", "dead-old", "retry-4",
		}},
		{sortNextDue, []string{
			"nobody-polls-42s", "nobody-polls-5s", "retry-2-due-now", "scheduled-just-due", "lease-expired", // all due a second ago: by workflow id
			"retry-2", "retry-4", "running-b", "running-a", "scheduled-later",
			"dead-new", "dead-old", // nothing is due: last, by workflow id
		}},
		{sortAttempt, []string{
			"dead-new", "dead-old", "retry-4", "retry-2", "nobody-polls-5s", "retry-2-due-now",
			"nobody-polls-42s", "running-a", "scheduled-later", "running-b", "scheduled-just-due", "lease-expired",
		}},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.key.String(), " ", ""), func(t *testing.T) {
			t.Parallel()
			rows := urgencyFixture()
			name := map[*durablev1.PendingActivity]string{}
			var rs []ranked
			for n, a := range rows {
				name[a] = n
				rs = append(rs, ranked{a, urgencyOf(a, t0)})
			}
			slices.SortFunc(rs, func(x, y ranked) int {
				if rankedLess(c.key, x, y) {
					return -1
				}
				if rankedLess(c.key, y, x) {
					return 1
				}
				return 0
			})
			var got []string
			for _, r := range rs {
				got = append(got, name[r.a])
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("order by %s:\n got %v\nwant %v", c.key, got, c.want)
			}
		})
	}
}

// TestRowsBecomeOverdueAsTheClockMoves: a row due in a second, which no
// worker takes, rises to the top once client.NoPollerAfter has passed, with no event.
func TestRowsBecomeOverdueAsTheClockMoves(t *testing.T) {
	t.Parallel()
	s := newState()
	s.advance(t0)
	late := act("z-late", "1", "Charge", stScheduled, 1, 5)
	late.NextAttemptTime = at(time.Second)
	retry := act("a-retry", "1", "Charge", stRetrying, 3, 5)
	retry.NextAttemptTime = at(time.Minute)
	s.replaceWith([]*durablev1.PendingActivity{late, retry}, nil)
	if first := s.attempts.set.At(0).GetWorkflowId(); first != "a-retry" {
		t.Fatalf("at t0 the first row is %s, want a-retry", first)
	}
	s.advance(t0.Add(time.Second + client.NoPollerAfter))
	if first := s.attempts.set.At(0).GetWorkflowId(); first != "a-retry" {
		t.Fatalf("at the grace's end the first row is %s, want a-retry", first)
	}
	s.advance(t0.Add(time.Second + client.NoPollerAfter + time.Millisecond))
	if first := s.attempts.set.At(0).GetWorkflowId(); first != "z-late" {
		t.Fatalf("past the grace the first row is %s, want z-late", first)
	}
	if s.attempts.set.Index(keyOf(late)) != 0 || s.attempts.set.Index(keyOf(retry)) != 1 {
		t.Fatal("the set cannot find its rows again after the move")
	}
}

// TestSupersededPromotionsDoNotMoveRows: a row that was taken by a worker
// before it fell due stays where running rows go.
func TestSupersededPromotionsDoNotMoveRows(t *testing.T) {
	t.Parallel()
	s := newState()
	s.advance(t0)
	a := act("w", "1", "Charge", stScheduled, 1, 5)
	a.NextAttemptTime = at(time.Second)
	s.upsertActivities([]*durablev1.PendingActivity{a})
	taken := act("w", "1", "Charge", stStarted, 1, 5)
	taken.LeaseDeadline = at(time.Minute)
	s.upsertActivities([]*durablev1.PendingActivity{taken})
	s.advance(t0.Add(10 * time.Second))
	if got := s.attempts.home.rank[s.attempts.set.At(0)]; got != urgencyRunning {
		t.Fatalf("rank = %d, want running", got)
	}
}

func TestPromotionHeapStaysBounded(t *testing.T) {
	t.Parallel()
	s := newState()
	s.advance(t0)
	for i := 0; i < 5000; i++ {
		a := act("w", "1", "Charge", stRetrying, 2, 5)
		a.NextAttemptTime = at(time.Duration(i) * time.Millisecond)
		s.upsertActivities([]*durablev1.PendingActivity{a})
		s.advance(t0)
	}
	if n := len(s.attempts.home.pending); n > 2*s.attempts.set.Len()+1025 {
		t.Fatalf("%d promotions pending for %d rows", n, s.attempts.set.Len())
	}
}

// TestHomeKeys drives s, ! and D on the fixture.
func TestHomeKeys(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	m = feed(next.(Model), snapshot(fixtureActivities(), fixtureWorkflows())...)
	row := func(m Model) string {
		a := m.st.attempts.set.At(m.views.attempts.cursor)
		return a.GetWorkflowId() + "/" + a.GetActivityId()
	}
	if got := row(m); got != "order-1002/1" {
		t.Fatalf("first row %s, want the overdue order-1002/1", got)
	}
	if !strings.Contains(m.View(), "sorted by urgency (s)") {
		t.Fatal("the status line does not name the order")
	}
	var stops []string
	for range 5 {
		m = press(m, "!")
		stops = append(stops, row(m))
	}
	want := []string{"order-0995/2", "order-0991/1", "order-0990/1", "order-1002/1", "order-0995/2"}
	if !slices.Equal(stops, want) {
		t.Fatalf("! stops at %v, want %v", stops, want)
	}
	// s keeps the cursor on its activity.
	m = press(m, "s")
	if row(m) != "order-0995/2" || m.st.attempts.home.key != sortWorkflow || !strings.Contains(m.View(), "sorted by workflow (s)") {
		t.Fatalf("after s: row %s, key %s", row(m), m.st.attempts.home.key)
	}
	m = press(m, "s")
	m = press(m, "s")
	m = press(m, "s")
	if m.st.attempts.home.key != sortUrgency {
		t.Fatalf("s four times: key %s, want urgency", m.st.attempts.home.key)
	}
	m = press(m, "D")
	if n := m.st.attempts.set.Len(); n != 4 {
		t.Fatalf("with dead letters hidden the home view has %d rows, want 4", n)
	}
	if m.st.dead.set.Len() != 3 {
		t.Fatal("hiding dead letters from the home view emptied screen 2")
	}
	if v := m.View(); !strings.Contains(v, "dead letters hidden") || strings.Contains(v, "order-0995") {
		t.Fatalf("view with dead letters hidden:\n%s", v)
	}
	m = press(m, "D")
	if n := m.st.attempts.set.Len(); n != 7 {
		t.Fatalf("after D again: %d rows, want 7", n)
	}
}

// TestSelectionFollowsItsActivity: rows that move above the cursor (a row
// becoming overdue, a new dead letter) do not change what is selected.
func TestSelectionFollowsItsActivity(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	m = feed(next.(Model), snapshot(fixtureActivities(), fixtureWorkflows())...)
	for range 4 {
		m = press(m, "j")
	}
	selected := func(m Model) string {
		a := m.st.attempts.set.At(m.views.attempts.cursor)
		return a.GetWorkflowId() + "/" + a.GetActivityId()
	}
	if got := selected(m); got != "order-1001/1" {
		t.Fatalf("selected %s, want order-1001/1", got)
	}
	// With no event, the selected retry falls due and nobody takes it,
	// and ReserveStock's lease runs out: both become overdue and move up.
	next, _ = m.Update(tickMsg{now: t0.Add(28 * time.Second)})
	m = next.(Model)
	var order []string
	for _, a := range m.st.attempts.set.Window(0, 3) {
		order = append(order, a.GetWorkflowId()+"/"+a.GetActivityId())
	}
	if want := []string{"order-1002/1", "order-1001/1", "order-1001/2"}; !slices.Equal(order, want) {
		t.Fatalf("first rows %v, want %v", order, want)
	}
	if got := selected(m); got != "order-1001/1" {
		t.Fatalf("after a row moved above it the cursor is on %s", got)
	}
	// A row overdue for longer arrives: it goes above the selection.
	late := act("order-0500", "1", "SendEmail", stScheduled, 1, 5)
	late.NextAttemptTime = at(-10 * time.Minute)
	m = feed(m, &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, Activities: []*durablev1.PendingActivity{late}})
	if m.st.attempts.set.At(0) != late {
		t.Fatal("the row overdue for longest is not first")
	}
	if got := selected(m); got != "order-1001/1" {
		t.Fatalf("after a row arrived above it the cursor is on %s", got)
	}
}
