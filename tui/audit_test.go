package tui

import (
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func auditUpsert(recs ...*durablev1.AuditRecord) *durablev1.WatchEvent {
	return &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, AuditRecords: recs}
}

// TestAuditViewPicksUpRecordsPushedOnWatch: a new record appears at the top,
// and a bulk redrive's updates (same id) replace its row.
func TestAuditViewPicksUpRecordsPushedOnWatch(t *testing.T) {
	t.Parallel()
	fake := fixtureBackend()
	fake.live = make(chan *durablev1.WatchEvent)
	tm := teatest.NewTestModel(t, setup(t, fake, Params{}), teatest.WithInitialTermSize(132, 43))
	waitFor(t, tm, "order-1001")
	tm.Send(keys("4")[0])
	waitFor(t, tm, "INC-7")

	fake.live <- auditUpsert(&durablev1.AuditRecord{Id: 43, Time: at(-time.Second), Principal: "bo", Role: "operator",
		Rpc: "RedriveDeadLetter", Reason: "INC-9 one more", Matched: 1, Count: 1, Done: true,
		Activities: []*durablev1.ActivityRef{{WorkflowId: "order-0995", ActivityId: "2"}}})
	waitFor(t, tm, "INC-9 one more")
	running := fixtureAudit()[0]
	running.Count, running.Done = 120, true
	fake.live <- auditUpsert(running)
	waitFor(t, tm, "120/120")

	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
	var ids []int64
	for _, r := range final.audit.order {
		ids = append(ids, r.GetId())
	}
	if want := []int64{43, 42, 41, 40, 39, 38}; !slices.Equal(ids, want) {
		t.Fatalf("records %v, want %v (newest first, one row per id)", ids, want)
	}
	lines := strings.Split(ansi.Strip(final.View()), "\n")
	if top := lines[3]; !strings.Contains(top, "order-0995/2") || !strings.HasPrefix(top, "›") {
		t.Fatalf("top row %q, want the pushed record under the cursor", top)
	}
}

// TestAuditLogMergesLoadAndStream covers the race between the load on
// (re)connection and updates on the stream: a record never goes back.
func TestAuditLogMergesLoadAndStream(t *testing.T) {
	t.Parallel()
	rec := func(id, count int64, done bool) *durablev1.AuditRecord {
		return &durablev1.AuditRecord{Id: id, Matched: 10, Count: count, Done: done}
	}
	cases := []struct {
		name   string
		stream []*durablev1.AuditRecord
		load   []*durablev1.AuditRecord
		want   map[int64]int64 // id → count
	}{
		{name: "AStaleLoadDoesNotUndoAnUpdate", stream: []*durablev1.AuditRecord{rec(5, 10, true)},
			load: []*durablev1.AuditRecord{rec(5, 4, false), rec(4, 1, true)}, want: map[int64]int64{5: 10, 4: 1}},
		{name: "AFresherLoadWins", stream: []*durablev1.AuditRecord{rec(5, 4, false)},
			load: []*durablev1.AuditRecord{rec(5, 10, true)}, want: map[int64]int64{5: 10}},
		{name: "RecordsNewerThanTheLoadStay", stream: []*durablev1.AuditRecord{rec(9, 1, false)},
			load: []*durablev1.AuditRecord{rec(5, 10, true)}, want: map[int64]int64{9: 1, 5: 10}},
		{name: "RecordsTheDaemonNoLongerListsGo", stream: []*durablev1.AuditRecord{rec(3, 1, true)},
			load: []*durablev1.AuditRecord{rec(5, 10, true)}, want: map[int64]int64{5: 10}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := newAuditLog()
			l.upsert(c.stream)
			l.load(c.load)
			if len(l.order) != len(c.want) || len(l.byID) != len(c.want) {
				t.Fatalf("%d records in order, %d by id, want %d", len(l.order), len(l.byID), len(c.want))
			}
			for i, r := range l.order {
				if i > 0 && l.order[i-1].GetId() <= r.GetId() {
					t.Fatalf("order not newest first at %d", i)
				}
				if c.want[r.GetId()] != r.GetCount() {
					t.Fatalf("record %d has count %d, want %d", r.GetId(), r.GetCount(), c.want[r.GetId()])
				}
			}
		})
	}
}

func TestAuditViewStates(t *testing.T) {
	t.Parallel()
	denied := status.Error(codes.PermissionDenied, `principal "dash" (role reader) may not call ListAuditRecords`)
	cases := []struct {
		name string
		msg  auditMsg
		want string
	}{
		{"Empty", auditMsg{}, "no operator actions recorded yet"},
		{"Refused", auditMsg{err: denied}, `could not read the audit log: permission denied: principal "dash" (role reader) may not call ListAuditRecords`},
		{"Loaded", auditMsg{records: fixtureAudit()}, "INC-7 gateway back"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := setup(t, fixtureBackend(), Params{})
			next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 20})
			m = feed(next.(Model), snapshot(fixtureActivities(), fixtureWorkflows())...)
			m = press(m, "4")
			if v := ansi.Strip(m.View()); !strings.Contains(v, "reading the audit log") {
				t.Fatalf("before the answer:\n%s", v)
			}
			next, _ = m.Update(c.msg)
			m = next.(Model)
			if v := ansi.Strip(m.View()); !strings.Contains(v, c.want) {
				t.Fatalf("view lacks %q:\n%s", c.want, v)
			}
		})
	}
}

func TestTabCyclesThroughTheAuditAndOperationsViews(t *testing.T) {
	t.Parallel()
	m := setup(t, fixtureBackend(), Params{})
	var got []screen
	for range 8 {
		got = append(got, m.screen)
		m = press(m, "tab")
	}
	if want := []screen{screenAttempts, screenDeadLetters, screenWorkflows, screenAudit, screenOperations, screenQueues, screenStats, screenAttempts}; !slices.Equal(got, want) {
		t.Fatalf("tab goes through %v, want %v", got, want)
	}
}

func TestTimelineSaysWhoRedroveAndWhy(t *testing.T) {
	t.Parallel()
	e := &durablev1.HistoryEvent{Type: durablev1.EventType_EVENT_TYPE_ACTIVITY_REDRIVEN, ActivityId: "1",
		Principal: "ana", Reason: "INC-7\ngateway back"}
	if got, want := eventDetail(e), "activity 1 by ana · INC-7 gateway back"; got != want {
		t.Fatalf("eventDetail = %q, want %q", got, want)
	}
}
