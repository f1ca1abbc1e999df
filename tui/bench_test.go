package tui

import (
	"fmt"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// BenchmarkUpdateAndView10k is one UPSERT of one activity plus one render,
// with 10,000 pending activities and 10,000 dead letters loaded.
func BenchmarkUpdateAndView10k(b *testing.B) {
	m := setup(b, &fakeBackend{}, Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	m = next.(Model)
	var acts []*durablev1.PendingActivity
	for i := 0; i < 10000; i++ {
		a := act(fmt.Sprintf("wf-%05d", i), "1", "Charge", stRetrying, 2, 5)
		a.NextAttemptTime = at(time.Duration(i) * time.Millisecond)
		a.LastFailure = fail("Timeout", "upstream slow")
		acts = append(acts, a)
		d := act(fmt.Sprintf("wf-%05d", i), "2", "Email", stDead, 5, 5)
		d.DeadLetteredTime = at(-time.Duration(i) * time.Second)
		d.LastFailure = fail(fmt.Sprintf("Type%d", i%7), "mailbox full")
		acts = append(acts, d)
	}
	m = feed(m, snapshot(acts, nil)...)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a := act(fmt.Sprintf("wf-%05d", i%10000), "1", "Charge", stRetrying, int32(2+i%3), 5)
		a.NextAttemptTime = at(time.Duration(i%5000) * time.Millisecond)
		next, _ := m.Update(watchEventMsg{gen: m.conn.gen, ev: &durablev1.WatchEvent{
			Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, Activities: []*durablev1.PendingActivity{a}}})
		m = next.(Model)
		_ = m.View()
	}
}

// BenchmarkQueueListAndView10k is one task queue list (which re-derives
// the stalled workflow tasks) plus one render of the home view, with 10,000
// pending activities and 200 workflows whose task waits on a queue that
// loses and regains its poller every other list.
func BenchmarkQueueListAndView10k(b *testing.B) {
	m := setup(b, &fakeBackend{}, Params{})
	next, _ := m.Update(tea.WindowSizeMsg{Width: 132, Height: 43})
	m = next.(Model)
	var acts []*durablev1.PendingActivity
	for i := 0; i < 10000; i++ {
		a := act(fmt.Sprintf("wf-%05d", i), "1", "Charge", stRetrying, 2, 5)
		a.NextAttemptTime = at(time.Duration(i) * time.Millisecond)
		acts = append(acts, a)
	}
	var wfs []*durablev1.WorkflowInfo
	for i := 0; i < 200; i++ {
		w := stalledWorkflow()
		w.WorkflowId = fmt.Sprintf("stuck-%03d", i)
		w.WorkflowTaskReadyTime = at(-time.Duration(i+3) * time.Second)
		wfs = append(wfs, w)
	}
	m = feed(m, snapshot(acts, wfs)...)
	polled := &durablev1.TaskQueue{Name: "orders-eu", WorkflowTasks: &durablev1.TaskBacklog{Ready: 200, OldestReadyTime: at(-203 * time.Second)},
		Pollers: []*durablev1.Poller{{Identity: "w", Kind: durablev1.TaskKind_TASK_KIND_WORKFLOW, LastPollTime: at(0)}}}
	lists := []*durablev1.TaskQueueList{{TaskQueues: []*durablev1.TaskQueue{polled}}, fixtureQueues()}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next, _ := m.Update(watchEventMsg{gen: m.conn.gen, ev: &durablev1.WatchEvent{
			Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, TaskQueues: lists[i%2]}})
		m = next.(Model)
		_ = m.View()
	}
}
