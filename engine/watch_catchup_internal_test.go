package engine

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
)

func upsertOf(acts ...*durablev1.PendingActivity) *durablev1.WatchEvent {
	return &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT, Activities: acts}
}

func removeOf(wf, id string) *durablev1.WatchEvent {
	return &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE,
		Removed: []*durablev1.ActivityRef{{WorkflowId: wf, ActivityId: id}}}
}

func act(wf, id string, attempt int32) *durablev1.PendingActivity {
	return &durablev1.PendingActivity{WorkflowId: wf, ActivityId: id, Attempt: attempt}
}

// caughtText lists what states say, in order, for a comparison.
func caughtText(states []caughtState) []string {
	var out []string
	for _, s := range states {
		switch m := s.state.(type) {
		case *durablev1.PendingActivity:
			out = append(out, fmt.Sprintf("activity %s/%s #%d", m.GetWorkflowId(), m.GetActivityId(), m.GetAttempt()))
		case *durablev1.ActivityRef:
			out = append(out, fmt.Sprintf("removed %s/%s", m.GetWorkflowId(), m.GetActivityId()))
		case *durablev1.WorkflowInfo:
			out = append(out, "workflow "+m.GetWorkflowId()+" "+m.GetStatus().String())
		case *durablev1.Operation:
			out = append(out, fmt.Sprintf("operation %s %d", m.GetId(), m.GetReleased()))
		case *durablev1.AuditRecord:
			out = append(out, fmt.Sprintf("audit %d %s", m.GetId(), m.GetReason()))
		case *durablev1.PolicyOverride:
			out = append(out, fmt.Sprintf("override %s/%s cleared=%v", m.GetActivityType(), m.GetTaskQueue(), m.GetCleared()))
		case *durablev1.WritesState:
			out = append(out, fmt.Sprintf("writes refused=%v", m.GetRefused()))
		}
	}
	return out
}

func sameText(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// TestCatchUpKeepsTheLastStateOfEachRecordSinceEachView: each watcher takes
// the records changed after it joined, each once in its last state, oldest
// change first, whatever the kind; what no catching watcher needs any more
// is let go as they leave.
func TestCatchUpKeepsTheLastStateOfEachRecordSinceEachView(t *testing.T) {
	c := &catchUp{budget: 1 << 30}
	early, late := &watcher{}, &watcher{}
	c.join(early)
	c.fold([]*durablev1.WatchEvent{upsertOf(act("w", "1", 1), act("w", "2", 1))})
	c.fold([]*durablev1.WatchEvent{
		removeOf("w", "2"),
		{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
			Workflows:       []*durablev1.WorkflowInfo{{WorkflowId: "w", Status: durablev1.WorkflowStatus_WORKFLOW_STATUS_RUNNING}},
			Operations:      []*durablev1.Operation{{Id: "op", Released: 1}},
			AuditRecords:    []*durablev1.AuditRecord{{Id: 7, Reason: "first"}},
			PolicyOverrides: []*durablev1.PolicyOverride{{ActivityType: "Charge", TaskQueue: "q"}},
			Writes:          &durablev1.WritesState{Refused: true}},
	})
	c.join(late)
	c.fold([]*durablev1.WatchEvent{upsertOf(act("w", "1", 2))})
	c.fold([]*durablev1.WatchEvent{{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		Operations:      []*durablev1.Operation{{Id: "op", Released: 5}},
		AuditRecords:    []*durablev1.AuditRecord{{Id: 7, Reason: "second"}},
		PolicyOverrides: []*durablev1.PolicyOverride{{ActivityType: "Charge", TaskQueue: "q", Cleared: true}},
		Writes:          &durablev1.WritesState{}}})

	sameText(t, "the early watcher's", caughtText(c.since(early.from)), []string{
		"removed w/2", "workflow w WORKFLOW_STATUS_RUNNING",
		"activity w/1 #2", "operation op 5", "audit 7 second", "override Charge/q cleared=true", "writes refused=false",
	})
	sameText(t, "the late watcher's", caughtText(c.since(late.from)), []string{
		"activity w/1 #2", "operation op 5", "audit 7 second", "override Charge/q cleared=true", "writes refused=false",
	})
	c.leave(early)
	if len(c.entries) != 5 {
		t.Errorf("%d entries after the early watcher left, want the 5 the late one needs", len(c.entries))
	}
	sameText(t, "the late watcher's, the early one gone", caughtText(c.since(late.from)), []string{
		"activity w/1 #2", "operation op 5", "audit 7 second", "override Charge/q cleared=true", "writes refused=false",
	})
	c.leave(late)
	if c.entries != nil || c.cost != 0 || c.oldest != nil || c.catching() {
		t.Errorf("the log holds %d entries costing %d with no watcher catching up", len(c.entries), c.cost)
	}
	// A watcher that joins later takes only what changed after.
	again := &watcher{}
	c.join(again)
	c.fold([]*durablev1.WatchEvent{upsertOf(act("w", "3", 1))})
	sameText(t, "a later watcher's", caughtText(c.since(again.from)), []string{"activity w/3 #1"})
}

// TestCatchUpOverBudgetCutsOffTheOldestView: a log over budget cuts off the
// watcher whose view is oldest, then the next, and keeps what the others
// need.
func TestCatchUpOverBudgetCutsOffTheOldestView(t *testing.T) {
	e := &Engine{watchers: map[*watcher]struct{}{}}
	one := act("w", "1", 1)
	entry := catchUpEntryCost + catchUpHeapFactor*proto.Size(one)
	e.catchUp.budget = 3 * entry
	var ws []*watcher
	for i := range 3 {
		w := &watcher{ch: make(chan *durablev1.WatchEvent, 1), done: make(chan struct{})}
		e.watchers[w] = struct{}{}
		e.catchUp.join(w)
		ws = append(ws, w)
		e.sendLocked([]*durablev1.WatchEvent{upsertOf(act("w", fmt.Sprint(i), 1))})
	}
	// Three entries: within the budget.
	for i, w := range ws {
		if !w.catching {
			t.Fatalf("watcher %d cut off within the budget", i)
		}
	}
	e.sendLocked([]*durablev1.WatchEvent{upsertOf(act("w", "3", 1))})
	if ws[0].catching || !errorsIsLagged(ws[0]) {
		t.Fatal("the oldest watcher still catches up with the log over budget")
	}
	if !ws[1].catching || !ws[2].catching {
		t.Fatal("a watcher other than the oldest was cut off")
	}
	if _, ok := e.watchers[ws[0]]; ok {
		t.Fatal("the cut-off watcher is still among the watchers")
	}
	sameText(t, "the second watcher's", caughtText(e.catchUp.since(ws[1].from)), []string{"activity w/1 #1", "activity w/2 #1", "activity w/3 #1"})
	sameText(t, "the third watcher's", caughtText(e.catchUp.since(ws[2].from)), []string{"activity w/2 #1", "activity w/3 #1"})
}

func errorsIsLagged(w *watcher) bool {
	select {
	case <-w.done:
		return w.err == ErrWatchLagged
	default:
		return false
	}
}

// TestCatchUpEventsKeepTheOrderOfChanges: the states go out in the order of
// their last changes, a run of one kind in events of at most snapshotChunk
// items, so that a reader that sees a change has seen every older one. An
// upsert after removals follows them, and does not join the upserts before.
func TestCatchUpEventsKeepTheOrderOfChanges(t *testing.T) {
	var states []caughtState
	for i := range 700 {
		states = append(states, caughtState{state: act("w", fmt.Sprint(i), 1)})
	}
	for i := range 600 {
		states = append(states, caughtState{state: &durablev1.ActivityRef{WorkflowId: "x", ActivityId: fmt.Sprint(i)}, removed: true})
	}
	states = append(states,
		caughtState{state: &durablev1.WorkflowInfo{WorkflowId: "the-end"}},
		caughtState{state: &durablev1.WritesState{Refused: true}},
		caughtState{state: &durablev1.ActivityRef{WorkflowId: "y", ActivityId: "1"}, removed: true},
		caughtState{state: act("z", "1", 1)})
	var got []string
	for _, ev := range catchUpEvents(states, ts(time.Unix(0, 0))) {
		got = append(got, fmt.Sprintf("%s %d %d %d writes=%v", ev.GetKind(), len(ev.GetActivities()), len(ev.GetWorkflows()), len(ev.GetRemoved()), ev.GetWrites() != nil))
	}
	sameText(t, "events", got, []string{
		"WATCH_EVENT_KIND_UPSERT 500 0 0 writes=false",
		"WATCH_EVENT_KIND_UPSERT 200 0 0 writes=false",
		"WATCH_EVENT_KIND_REMOVE 0 0 500 writes=false",
		"WATCH_EVENT_KIND_REMOVE 0 0 100 writes=false",
		"WATCH_EVENT_KIND_UPSERT 0 1 0 writes=true",
		"WATCH_EVENT_KIND_REMOVE 0 0 1 writes=false",
		"WATCH_EVENT_KIND_UPSERT 1 0 0 writes=false",
	})
}

// BenchmarkCatchUpEntry reports what an entry of the catch-up log takes on
// the heap (its state included, as the log keeps it alive) against what it
// is charged (catchUpEntryCost, catchUpHeapFactor), for an activity waiting
// on a retry after a timeout and for one removed.
//
//	go test -run '^$' -bench CatchUpEntry -benchtime 100000x ./engine
func BenchmarkCatchUpEntry(b *testing.B) {
	waiting := func(i int) *durablev1.WatchEvent {
		now := time.Unix(1_700_000_000, 0)
		wf, id := fmt.Sprintf("bench-wf-%07d", i/1000), fmt.Sprintf("%04d", i%1000)
		return upsertOf(&durablev1.PendingActivity{WorkflowId: wf, ActivityId: id, ActivityType: "Charge", TaskQueue: "waiting",
			State: durablev1.ActivityState_ACTIVITY_STATE_RETRYING, Attempt: 2, MaxAttempts: 5,
			ScheduledTime: ts(now), NextAttemptTime: ts(now.Add(3 * time.Hour)), LastStartedTime: ts(now),
			LastFailure:        &durablev1.Failure{Type: "StartToCloseTimeout", Message: "the lease ended before the activity answered"},
			LastWorkerIdentity: "worker-1", IdempotencyKey: wf + "/" + id, FailureFingerprint: "5f0c2a1e9b7d",
			Options:        &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{InitialMs: 10_800_000, MaxAttempts: 5}},
			OptionsInForce: &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{InitialMs: 10_800_000, MaxAttempts: 5}},
			Attempts:       []*durablev1.AttemptRecord{{Attempt: 1}},
		})
	}
	removed := func(i int) *durablev1.WatchEvent {
		return removeOf(fmt.Sprintf("bench-wf-%07d", i/1000), fmt.Sprintf("%04d", i%1000))
	}
	for _, bc := range []struct {
		name  string
		event func(int) *durablev1.WatchEvent
	}{{"Waiting", waiting}, {"Removed", removed}} {
		b.Run(bc.name, func(b *testing.B) {
			c := &catchUp{budget: 1 << 40}
			c.join(&watcher{})
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for i := range b.N {
				c.fold([]*durablev1.WatchEvent{bc.event(i)})
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "heap-B/entry")
			b.ReportMetric(float64(c.cost)/float64(b.N), "charged-B/entry")
			runtime.KeepAlive(c)
		})
	}
}
