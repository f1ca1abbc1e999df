package tui

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/tinyllm/durable/client"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func queueUpsert(qs ...*durablev1.TaskQueue) *durablev1.WatchEvent {
	return &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		TaskQueues: &durablev1.TaskQueueList{TaskQueues: qs}}
}

func workflowUpsert(w *durablev1.WorkflowInfo) *durablev1.WatchEvent {
	return &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		Workflows: []*durablev1.WorkflowInfo{w}}
}

func homeRows(m Model) []string {
	var out []string
	for i := 0; i < m.st.attempts.set.Len(); i++ {
		a := m.st.attempts.set.At(i)
		out = append(out, a.GetWorkflowId()+"/"+a.GetActivityId())
	}
	return out
}

func hasRow(m Model, key string) bool {
	for _, r := range homeRows(m) {
		if r == key {
			return true
		}
	}
	return false
}

func TestStalledWorkflowTaskShowsOnlyAfterTheGraceAndRanksOverdue(t *testing.T) {
	t.Parallel()
	m := setup(t, &fakeBackend{}, Params{})
	w := stalledWorkflow()
	w.WorkflowTaskReadyTime = at(-time.Second) // waited 1s: not yet
	evs := snapshot(fixtureActivities(), []*durablev1.WorkflowInfo{w})
	m = feed(m, evs...)
	if hasRow(m, "order-2001/") {
		t.Fatalf("a workflow task waiting 1s has a row: %v", homeRows(m))
	}
	next, _ := m.Update(tickMsg{now: t0.Add(client.NoPollerAfter)})
	m = next.(Model)
	rows := homeRows(m)
	if len(rows) < 2 || rows[0] != "order-1002/1" || rows[1] != "order-2001/" {
		t.Fatalf("after the grace the rows are %v, want the stalled task second, after the activity overdue longer", rows)
	}
	if u := m.st.attempts.home.rank[m.st.attempts.set.At(1)]; u != urgencyOverdue {
		t.Fatalf("the stalled task ranks %d, want overdue", u)
	}
	if !strings.Contains(ansi.Strip(m.View()), "stalled") {
		t.Fatalf("the view lacks the stalled row:\n%s", ansi.Strip(m.View()))
	}
	m = press(m, "3")
	if v := ansi.Strip(m.View()); !regexp.MustCompile(`order-2001\s+FlakyDemo\s+stalled`).MatchString(v) {
		t.Fatalf("the workflows view does not say the workflow is stalled:\n%s", v)
	}
}

func TestStalledWorkflowTaskGoesWhenTakenOrWhenAPollerComes(t *testing.T) {
	t.Parallel()
	evs := snapshot(nil, []*durablev1.WorkflowInfo{stalledWorkflow()})
	evs[1].TaskQueues = fixtureQueues()
	m := feed(setup(t, &fakeBackend{}, Params{}), evs...)
	if !hasRow(m, "order-2001/") {
		t.Fatalf("no stalled row: %v", homeRows(m))
	}

	// A worker polls the queue: the task is not stalled, only waiting.
	polled := &durablev1.TaskQueue{Name: "orders-eu", WorkflowTasks: &durablev1.TaskBacklog{Ready: 1, OldestReadyTime: at(-5 * time.Second)},
		Pollers: []*durablev1.Poller{{Identity: "w", Kind: durablev1.TaskKind_TASK_KIND_WORKFLOW, LastPollTime: timestamppb.New(t0), Parked: true}}}
	m = feed(m, queueUpsert(polled))
	if hasRow(m, "order-2001/") {
		t.Fatalf("the row stays after a poller came: %v", homeRows(m))
	}
	// The poller goes again.
	m = feed(m, queueUpsert())
	if !hasRow(m, "order-2001/") {
		t.Fatalf("no row after the queue lost its poller: %v", homeRows(m))
	}
	// A worker takes it: the workflow no longer has a task due.
	taken := stalledWorkflow()
	taken.WorkflowTaskReadyTime, taken.WorkflowTaskAttempt = nil, 0
	m = feed(m, workflowUpsert(taken))
	if hasRow(m, "order-2001/") {
		t.Fatalf("the row stays after the task was taken: %v", homeRows(m))
	}
}

func TestStalledWorkflowTaskSurvivesAFilterAndOpensItsQueue(t *testing.T) {
	t.Parallel()
	evs := snapshot(fixtureActivities(), []*durablev1.WorkflowInfo{stalledWorkflow()})
	evs[1].TaskQueues = fixtureQueues()
	m := feed(setup(t, &fakeBackend{}, Params{}), evs...)
	m = m.setFilter("order-2001")
	if rows := homeRows(m); len(rows) != 1 || rows[0] != "order-2001/" {
		t.Fatalf("filtered rows %v, want the stalled task alone", rows)
	}
	m = press(m, "enter")
	if m.screen != screenQueue || m.views.queue.name != "orders-eu" {
		t.Fatalf("enter on the row opened screen %d queue %q, want the queue orders-eu", m.screen, m.views.queue.name)
	}
	m = press(m, "esc")
	if m.screen != screenAttempts {
		t.Fatalf("esc went to screen %d, want the home view", m.screen)
	}
}

func TestQueuesScreenPutsTheStalledQueueFirstAndReplacesTheListWhole(t *testing.T) {
	t.Parallel()
	evs := snapshot(nil, nil)
	evs[1].TaskQueues = fixtureQueues()
	m := feed(setup(t, &fakeBackend{}, Params{}), evs...)
	var names []string
	for _, q := range m.st.queues.list {
		names = append(names, q.GetName())
	}
	if got := strings.Join(names, " "); got != "orders-eu default reports" {
		t.Fatalf("queues in the order %q, want the stalled one first, then by name", got)
	}
	// The cursor stays on its queue when a queue before it stalls.
	m = press(m, "6")
	m = press(m, "j")
	m = press(m, "j")
	if c := m.views.queues.cursor; m.st.queues.list[c].GetName() != "reports" {
		t.Fatalf("cursor on %q, want reports", m.st.queues.list[c].GetName())
	}
	qs := fixtureQueues().GetTaskQueues()
	qs = append(qs, &durablev1.TaskQueue{Name: "billing", Stalled: true})
	m = feed(m, queueUpsert(qs...))
	if c := m.views.queues.cursor; m.st.queues.list[c].GetName() != "reports" {
		t.Fatalf("after billing stalled the cursor is on %q, want reports", m.st.queues.list[c].GetName())
	}
	m = feed(m, queueUpsert(&durablev1.TaskQueue{Name: "solo"}))
	if len(m.st.queues.list) != 1 || m.st.queues.list[0].GetName() != "solo" {
		t.Fatalf("after a new list the console keeps %v", m.st.queues.list)
	}
	m = press(m, "6")
	if v := ansi.Strip(m.View()); !strings.Contains(v, "[6 queues (1)]") || !strings.Contains(v, "solo") {
		t.Fatalf("queues screen:\n%s", v)
	}
}

func TestCopyOnAStalledRowOrAQueueTakesTheWorkflowIDOrTheQueueName(t *testing.T) {
	t.Parallel()
	evs := snapshot(nil, []*durablev1.WorkflowInfo{stalledWorkflow()})
	evs[1].TaskQueues = fixtureQueues()
	m := feed(setup(t, &fakeBackend{}, Params{}), evs...)
	if got := press(m, "y").flash.text; got != "copied order-2001" {
		t.Fatalf("y on the stalled row says %q, want the workflow id copied", got)
	}
	m = press(m, "6")
	if got := press(m, "y").flash.text; got != "copied orders-eu" {
		t.Fatalf("y on the queues screen says %q, want the queue copied", got)
	}
}
