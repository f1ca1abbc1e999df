package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// snapshotItems is what a Watch's snapshot may hold read ahead of what it
// sent: the chunk being read, the one handed over and the one being sent
// (500 items each), and a page of the store's scan.
const snapshotItems = 3*500 + 1024

// countingStore counts the activity records its views' ScanActivities
// passed on.
type countingStore struct {
	engine.Store
	read atomic.Int64
}

func (s *countingStore) View(fn func(engine.Tx) error) error {
	return s.Store.View(func(tx engine.Tx) error { return fn(countingTx{Tx: tx, read: &s.read}) })
}

type countingTx struct {
	engine.Tx
	read *atomic.Int64
}

func (tx countingTx) ScanActivities(fn func(*durablev1.ActivityRecord) bool) error {
	return tx.Tx.ScanActivities(func(a *durablev1.ActivityRecord) bool {
		tx.read.Add(1)
		return fn(a)
	})
}

// scheduleMany starts workflows wf-0, wf-1, … on queue "q" and schedules
// perWorkflow activities in each (ids 0000, 0001, …), n in all, each
// retried after an hour up to five attempts.
func (h *harness) scheduleMany(n, perWorkflow int) {
	h.t.Helper()
	ctx := context.Background()
	for w := 0; w*perWorkflow < n; w++ {
		wf := fmt.Sprintf("wf-%d", w)
		h.start(wf, "Many")
		wt := h.pollWorkflow()
		if wt.GetWorkflowId() != wf {
			h.t.Fatalf("workflow task of %q, want %s", wt.GetWorkflowId(), wf)
		}
		var cmds []*durablev1.Command
		for i := range min(perWorkflow, n-w*perWorkflow) {
			cmds = append(cmds, &durablev1.Command{Type: durablev1.CommandType_COMMAND_TYPE_SCHEDULE_ACTIVITY, ActivityId: fmt.Sprintf("%04d", i), ActivityType: "Charge",
				ActivityOptions: &durablev1.ActivityOptions{RetryPolicy: &durablev1.RetryPolicy{InitialMs: 3_600_000, MaxAttempts: 5}}})
		}
		if _, err := h.e.CompleteWorkflowTask(ctx, &durablev1.CompleteWorkflowTaskRequest{TaskToken: wt.GetTaskToken(), Commands: cmds}); err != nil {
			h.t.Fatal(err)
		}
	}
}

// TestWatchSnapshotIsSentAsItIsRead: a watcher whose client takes each
// snapshot chunk only after a commit of its own never has more than three
// chunks and a store page read ahead of what it sent, over 4,000 pending
// activities; the first chunk is sent long before the last is read.
func TestWatchSnapshotIsSentAsItIsRead(t *testing.T) {
	t.Parallel()
	var st *countingStore
	h := setupOn(t, engine.Options{}, func(s engine.Store) engine.Store {
		st = &countingStore{Store: s}
		return st
	})
	const n = 4000
	h.scheduleMany(n, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st.read.Store(0)
	sent, first, chunks := 0, int64(-1), 0
	err := h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
		switch ev.GetKind() {
		case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT:
			read := st.read.Load()
			if first < 0 {
				first = read
			}
			if read > int64(sent+snapshotItems) {
				t.Errorf("after %d activities sent, %d read", sent, read)
			}
			sent += len(ev.GetActivities())
			chunks++
			// A slow client: the reader has all the time a commit takes
			// to run ahead.
			h.start(fmt.Sprintf("probe-%d", chunks), "Probe")
		case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE:
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch = %v, want it to end with the context", err)
	}
	if sent != n || chunks < n/500 {
		t.Fatalf("snapshot of %d activities in %d events, want %d in at least %d", sent, chunks, n, n/500)
	}
	if first >= n {
		t.Fatalf("the first chunk was sent after %d activities were read, want it sent before the last was read", first)
	}
}

// activityVersion orders the states of one activity as its transitions
// move it: by attempt, and within an attempt, started after waiting.
func activityVersion(a *durablev1.PendingActivity) int32 {
	v := 2 * a.GetAttempt()
	if a.GetState() == durablev1.ActivityState_ACTIVITY_STATE_STARTED {
		v++
	}
	return v
}

// TestWatchSnapshotStreamRacingCommitsShowsEachChangeOnce: while a
// snapshot of 4,000 activities streams, the client commits between chunks
// (leases 150 activities, completes a third of them, fails a third into a
// retry, starts a workflow), so changes land on activities already sent
// and on ones not read yet. Each activity is in the snapshot at most once;
// every change after it is newer than what the client holds (nothing shown
// twice), nothing follows an activity's removal, and the client ends with
// exactly what a snapshot taken afterwards shows (nothing missed).
func TestWatchSnapshotStreamRacingCommitsShowsEachChangeOnce(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.scheduleMany(4000, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	work := func(round int) {
		r, err := h.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w", MaxTasks: 150})
		if err != nil {
			t.Error(err)
			return
		}
		for i, task := range r.GetTasks() {
			switch i % 3 {
			case 0:
				_, err = h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()})
			case 1:
				_, err = h.e.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: &durablev1.Failure{Type: "Flaky", Message: "again"}})
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
		h.start(fmt.Sprintf("during-%d", round), "During")
	}

	m := &watchModel{}
	holds := map[string]int32{} // activity → the version the client holds
	inSnapshot, removed := map[string]bool{}, map[string]bool{}
	rounds := 0
	events := make(chan *durablev1.WatchEvent, 1<<16)
	ended := make(chan error, 1)
	go func() {
		ended <- h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
			if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT {
				rounds++
				work(rounds)
			}
			events <- ev
			return nil
		})
	}()
	h.synced(m, events, ended, func(ev *durablev1.WatchEvent) {
		switch ev.GetKind() {
		case durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT:
			for _, a := range ev.GetActivities() {
				k := activityKey(a)
				if inSnapshot[k] {
					t.Errorf("%s is twice in the snapshot", k)
				}
				inSnapshot[k], holds[k] = true, activityVersion(a)
			}
		case durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT:
			for _, a := range ev.GetActivities() {
				k := activityKey(a)
				if removed[k] {
					t.Errorf("%s changed after its removal: %v", k, a)
				}
				if v, ok := holds[k]; ok && activityVersion(a) <= v {
					t.Errorf("%s: attempt %d %v after the client held version %d: a change shown twice or out of order", k, a.GetAttempt(), a.GetState(), v)
				}
				holds[k] = activityVersion(a)
			}
		case durablev1.WatchEventKind_WATCH_EVENT_KIND_REMOVE:
			for _, r := range ev.GetRemoved() {
				k := r.GetWorkflowId() + "/" + r.GetActivityId()
				if removed[k] {
					t.Errorf("%s removed twice", k)
				}
				removed[k] = true
			}
		}
	})
	if rounds < 8 {
		t.Fatalf("%d rounds of commits during the snapshot, want one per chunk (8)", rounds)
	}
	if len(removed) == 0 {
		t.Fatal("no activity was removed while the watch ran")
	}
	want := snapshotOf(t, h.e)
	if d := m.diff(want); len(d) > 0 {
		t.Errorf("the watcher differs from the store:\n%v", d)
	}
	if len(m.workflows) != len(want.workflows) {
		t.Errorf("the watcher shows %d workflows, the store %d", len(m.workflows), len(want.workflows))
	}
}

// synced applies the watch's events to m, and each to check, until the
// snapshot is done and a workflow started after it ("the-end") is shown.
func (h *harness) synced(m *watchModel, events <-chan *durablev1.WatchEvent, ended <-chan error, check func(*durablev1.WatchEvent)) {
	h.t.Helper()
	deadline := time.After(2 * time.Minute)
	started := false
	for m.workflows["the-end"] == nil {
		if m.synced && !started {
			h.start("the-end", "End")
			started = true
		}
		select {
		case ev := <-events:
			check(ev)
			m.apply(ev)
		case err := <-ended:
			h.t.Fatalf("the watch ended: %v", err)
		case <-deadline:
			h.t.Fatal("the watcher did not see a change made after its snapshot within 2 minutes")
		}
	}
}

// TestWatchSlowClientHoldsNoOneBack: a client that takes no snapshot chunk
// keeps neither another watcher from its snapshot nor the engine from
// closing.
func TestWatchSlowClientHoldsNoOneBack(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.scheduleMany(2000, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck, release := make(chan struct{}), make(chan struct{})
	slowEnded := make(chan error, 1)
	go func() {
		slowEnded <- h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
			select {
			case stuck <- struct{}{}:
			default:
			}
			<-release
			return nil
		})
	}()
	defer close(release)
	select {
	case <-stuck:
	case <-time.After(time.Minute):
		t.Fatal("the slow watcher got no event within a minute")
	}
	m := snapshotOf(t, h.e)
	if len(m.activities) != 2000 {
		t.Fatalf("the second watcher's snapshot has %d activities, want 2000", len(m.activities))
	}
	closed := make(chan error, 1)
	go func() { closed <- h.e.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close waited a minute for a client that takes nothing")
	}
}

// slowSnapshot opens a watch whose client takes the first snapshot event
// only once release is closed: every change committed meanwhile lands after
// its view, while its snapshot streams. The events it sent go to events.
func (h *harness) slowSnapshot(ctx context.Context) (events chan *durablev1.WatchEvent, ended chan error, release func()) {
	h.t.Helper()
	first, released := make(chan struct{}), make(chan struct{})
	events, ended = make(chan *durablev1.WatchEvent, 1<<16), make(chan error, 1)
	go func() {
		n := 0
		ended <- h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
			if n == 0 {
				close(first)
				<-released
			}
			n++
			events <- ev
			return nil
		})
	}()
	select {
	case <-first:
	case <-time.After(time.Minute):
		h.t.Fatal("no snapshot event within a minute")
	}
	return events, ended, func() { close(released) }
}

// startMany starts n workflows prefix-0, prefix-1, …, one commit each.
func (h *harness) startMany(prefix string, n int) {
	h.t.Helper()
	for i := range n {
		if _, err := h.e.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{WorkflowId: fmt.Sprintf("%s-%d", prefix, i), WorkflowType: "Busy", TaskQueue: "busy"}); err != nil {
			h.t.Fatal(err)
		}
	}
}

// TestWatchSnapshotOutlastingItsBufferEndsConsistent: while a watcher's
// client holds its first snapshot chunk, more changes commit than a live
// watcher's buffer holds (4,096 events): activities of the snapshot leased,
// completed and failed, and 4,200 workflows started one commit each. The
// watcher is not cut off: after its snapshot it gets each changed record in
// its last state, and ends with what a snapshot taken afterwards shows, in
// far fewer events than the 4,450 changes: the catch-up goes in the order
// of the changes, so the completed activities, which alternate with the
// failed ones, make an event each and so do the failed ones (about 100),
// and the workflows fill events of snapshotChunk.
func TestWatchSnapshotOutlastingItsBufferEndsConsistent(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.scheduleMany(2000, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, ended, release := h.slowSnapshot(ctx)
	r, err := h.e.PollActivityTask(now(), &durablev1.PollActivityTaskRequest{TaskQueue: "q", Identity: "w", MaxTasks: 150})
	if err != nil {
		t.Fatal(err)
	}
	for i, task := range r.GetTasks() {
		switch i % 3 {
		case 0:
			_, err = h.e.CompleteActivityTask(ctx, &durablev1.CompleteActivityTaskRequest{TaskToken: task.GetTaskToken()})
		case 1:
			_, err = h.e.FailActivityTask(ctx, &durablev1.FailActivityRequest{TaskToken: task.GetTaskToken(), Failure: &durablev1.Failure{Type: "Flaky", Message: "again"}})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	h.startMany("busy", 4200)
	release()
	m := &watchModel{}
	after, removed := 0, 0
	h.synced(m, events, ended, func(ev *durablev1.WatchEvent) {
		if m.synced {
			after++
		}
		removed += len(ev.GetRemoved())
	})
	want := snapshotOf(t, h.e)
	if d := m.diff(want); len(d) > 0 {
		t.Errorf("the watcher differs from the store:\n%v", d)
	}
	if len(m.workflows) != len(want.workflows) || len(m.activities) != 2000-50 {
		t.Errorf("the watcher shows %d workflows and %d activities, the store %d and %d", len(m.workflows), len(m.activities), len(want.workflows), len(want.activities))
	}
	if removed != 50 {
		t.Errorf("%d activities removed, want the 50 completed", removed)
	}
	if after > 120 {
		t.Errorf("%d events after the snapshot, want the changes of each record sent once in its last state (about 110 events)", after)
	}
}

// TestWatchOutgrowingTheCatchUpLogEndsAfterItsSnapshot: a watcher whose
// snapshot streams while more records change than the daemon keeps for it
// still gets the whole snapshot and SNAPSHOT_DONE, then ErrWatchLagged and
// no change: a client that subscribes again never holds half a snapshot.
// Another watcher that opens after it is not held to its fate.
func TestWatchOutgrowingTheCatchUpLogEndsAfterItsSnapshot(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.scheduleMany(2000, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.e.SetCatchUpBudget(16 << 10)
	events, ended, release := h.slowSnapshot(ctx)
	// Far more than 16 KiB of workflows.
	h.startMany("busy", 200)
	release()
	var err error
	select {
	case err = <-ended:
	case <-time.After(time.Minute):
		t.Fatal("the lagging watch did not end within a minute")
	}
	if !errors.Is(err, engine.ErrWatchLagged) {
		t.Fatalf("Watch = %v, want ErrWatchLagged", err)
	}
	close(events)
	var kinds []durablev1.WatchEventKind
	acts := 0
	for ev := range events {
		kinds = append(kinds, ev.GetKind())
		acts += len(ev.GetActivities())
	}
	if last := kinds[len(kinds)-1]; last != durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE || acts != 2000 {
		t.Fatalf("the lagging watcher got %d activities and ended with %v after %d events, want the 2,000 and SNAPSHOT_DONE last", acts, last, len(kinds))
	}
	if m := snapshotOf(t, h.e); len(m.workflows) < 200 {
		t.Fatalf("a watcher opened after it shows %d workflows, want at least the 200 started", len(m.workflows))
	}
}

// TestWatchLaggingAfterItsSnapshotIsCutOff: a live watcher whose client
// takes nothing while more events are published than its buffer holds
// (4,096) ends with ErrWatchLagged.
func TestWatchLaggingAfterItsSnapshotIsCutOff(t *testing.T) {
	t.Parallel()
	h := setup(t, engine.Options{})
	h.scheduleMany(100, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stuck, release := make(chan struct{}), make(chan struct{})
	ended := make(chan error, 1)
	go func() {
		live := false // the next event is the first after the snapshot
		ended <- h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
			if live {
				live = false
				close(stuck)
				<-release
				return nil
			}
			if ev.GetKind() == durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT_DONE {
				live = true
			}
			return nil
		})
	}()
	deadline := time.After(time.Minute)
	for i := 0; ; i++ {
		h.start(fmt.Sprintf("first-%d", i), "First")
		select {
		case <-stuck:
		case <-deadline:
			t.Fatal("the watcher got no change within a minute")
		default:
			continue
		}
		break
	}
	h.startMany("busy", 4200)
	close(release)
	select {
	case err := <-ended:
		if !errors.Is(err, engine.ErrWatchLagged) {
			t.Fatalf("Watch = %v, want ErrWatchLagged", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the lagging watch did not end within a minute")
	}
}

// longViewStore is a store that keeps one snapshot view open at a time.
type longViewStore struct{ engine.Store }

func (longViewStore) LongViews() int { return 1 }

// TestWatchWaitsForALongViewOfAStoreThatBoundsThem: on a store with one
// long view (as a PostgreSQL store keeps connections free for commits), a
// second watcher gets its snapshot only once the first one, whose client
// takes nothing, has ended.
func TestWatchWaitsForALongViewOfAStoreThatBoundsThem(t *testing.T) {
	t.Parallel()
	h := setupOn(t, engine.Options{}, func(s engine.Store) engine.Store { return longViewStore{s} })
	h.scheduleMany(2000, 1000)
	slowCtx, endSlow := context.WithCancel(context.Background())
	defer endSlow()
	stuck := make(chan struct{}, 1)
	slowEnded := make(chan error, 1)
	go func() {
		slowEnded <- h.e.Watch(slowCtx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
			select {
			case stuck <- struct{}{}:
			default:
			}
			<-slowCtx.Done()
			return slowCtx.Err()
		})
	}()
	select {
	case <-stuck:
	case <-time.After(time.Minute):
		t.Fatal("the slow watcher got no event within a minute")
	}
	var slowDone atomic.Bool
	got := make(chan bool, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.e.Watch(ctx, &durablev1.WatchRequest{}, func(ev *durablev1.WatchEvent) error {
		select {
		case got <- slowDone.Load():
		default:
		}
		return nil
	})
	// Commits meanwhile give the second watcher every chance to start.
	for i := range 20 {
		h.start(fmt.Sprintf("meanwhile-%d", i), "Meanwhile")
	}
	slowDone.Store(true)
	endSlow()
	select {
	case after := <-got:
		if !after {
			t.Fatal("the second watcher got an event while the first held the store's only long view")
		}
	case <-time.After(time.Minute):
		t.Fatal("the second watcher got nothing within a minute of the first ending")
	}
}
