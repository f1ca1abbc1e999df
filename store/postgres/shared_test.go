package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/store/storetest"
)

// waitFor bounds every wait on something another goroutine, connection or
// the database does; the machine may be busy, so it is generous.
const waitFor = 30 * time.Second

var (
	scheduled = durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED
	started   = durablev1.ActivityState_ACTIVITY_STATE_STARTED
)

// openNode opens a store on dsn under a node name, closed when the test
// ends.
func openNode(t *testing.T, dsn, node string) *Store {
	t.Helper()
	s, err := Open(dsn, Options{MaxConns: 4, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// update runs fn in an update of s and fails the test on an error.
func update(t *testing.T, s *Store, fn func(engine.SharedTx) error) {
	t.Helper()
	if err := s.Update(func(tx engine.Tx) error { return fn(tx.(engine.SharedTx)) }); err != nil {
		t.Fatal(err)
	}
}

// putScheduled writes activities "0".."n-1" of workflow wf, scheduled on
// queue "q" at T0+i seconds with seq i+1.
func putScheduled(t *testing.T, s *Store, wf string, n int) {
	t.Helper()
	update(t, s, func(tx engine.SharedTx) error {
		for i := range n {
			if err := tx.PutActivity(storetest.NewActivity(wf, fmt.Sprint(i), scheduled, time.Duration(i)*time.Second, int64(i+1))); err != nil {
				return err
			}
		}
		return nil
	})
}

func ids(es []engine.QueueEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.WorkflowID+"/"+e.ActivityID)
	}
	return out
}

// TestClaimQueued_SkipsTheEntriesAnotherTransactionHolds claims two
// entries in one transaction and, while it is open, claims from the same
// queue in another: the second gets the other entries, at once, in queue
// order. A claim that takes nothing says when the next entry is due.
func TestClaimQueued_SkipsTheEntriesAnotherTransactionHolds(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a, b := openNode(t, dsn, "a"), openNode(t, dsn, "b")
	putScheduled(t, a, "wf", 5) // due T0, T0+1s, … T0+4s
	now := storetest.T0.Add(time.Hour)

	held, release := make(chan engine.Claimed, 1), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- a.Update(func(tx engine.Tx) error {
			got, err := tx.(engine.SharedTx).ClaimQueued(engine.ActivityTask, "q", now, 2)
			if err != nil {
				return err
			}
			held <- got
			<-release
			return nil
		})
	}()
	first := <-held
	var second, third engine.Claimed
	update(t, b, func(tx engine.SharedTx) error {
		var err error
		if second, err = tx.ClaimQueued(engine.ActivityTask, "q", now, 10); err != nil {
			return err
		}
		// A transaction's own locks do not hide entries from it.
		third, err = tx.ClaimQueued(engine.ActivityTask, "q", now, 10)
		return err
	})
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) time.Time { return storetest.T0.Add(d) }
	check := func(name string, got engine.Claimed, want []string, next time.Time) {
		t.Helper()
		if diff := diff(want, ids(got.Entries)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
		if !got.Next.Equal(next) {
			t.Errorf("%s: next %v; want %v", name, got.Next, next)
		}
	}
	check("first claim", first, []string{"wf/0", "wf/1"}, time.Time{})
	check("claim while the first is held", second, []string{"wf/2", "wf/3", "wf/4"}, time.Time{})
	check("claim of what this transaction holds", third, []string{"wf/2", "wf/3", "wf/4"}, time.Time{})
	// Entries due later than now are not claimed; a claim that takes none
	// says when the earliest of them is due.
	update(t, b, func(tx engine.SharedTx) error {
		got, err := tx.ClaimQueued(engine.ActivityTask, "q", at(time.Second), 10)
		check("claim at T0+1s", got, []string{"wf/0", "wf/1"}, time.Time{})
		return err
	})
	update(t, b, func(tx engine.SharedTx) error {
		got, err := tx.ClaimQueued(engine.ActivityTask, "q", at(-time.Second), 10)
		check("claim before T0", got, nil, at(0))
		return err
	})
	update(t, b, func(tx engine.SharedTx) error {
		got, err := tx.ClaimQueued(engine.ActivityTask, "q", at(1500*time.Millisecond), 1)
		check("claim of one at T0+1.5s", got, []string{"wf/0"}, time.Time{})
		return err
	})
	update(t, b, func(tx engine.SharedTx) error {
		got, err := tx.ClaimQueued(engine.ActivityTask, "other", at(-time.Second), 10)
		check("claim from another queue", got, nil, time.Time{})
		return err
	})
}

// TestClaimQueued_ConcurrentLeasesHandEachEntryOutOnce has workers on two
// stores claim and lease (the entry's activity written as started, which
// removes the entry) until the queue is empty: every activity is leased
// by exactly one committed transaction.
func TestClaimQueued_ConcurrentLeasesHandEachEntryOutOnce(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	stores := []*Store{openNode(t, dsn, "a"), openNode(t, dsn, "b")}
	const n = 60
	putScheduled(t, stores[0], "wf", n)
	now := storetest.T0.Add(time.Hour)

	var (
		mu      sync.Mutex
		leased  = map[string]int{}
		retries int
		wg      sync.WaitGroup
	)
	for w := range 6 {
		s := stores[w%2]
		wg.Go(func() {
			for {
				var got []engine.QueueEntry
				err := s.Update(func(tx engine.Tx) error {
					stx := tx.(engine.SharedTx)
					claimed, err := stx.ClaimQueued(engine.ActivityTask, "q", now, 3)
					if err != nil {
						return err
					}
					got = claimed.Entries
					for _, e := range got {
						a, err := tx.GetActivity(e.WorkflowID, e.ActivityID)
						if err != nil {
							return err
						}
						a.Info.State = started
						a.Info.NextAttemptTime = nil
						a.Info.LeaseDeadline = a.Info.ScheduledTime
						if err := tx.PutActivity(a); err != nil {
							return err
						}
					}
					return nil
				})
				if retryable(err) {
					mu.Lock()
					retries++
					mu.Unlock()
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, id := range ids(got) {
					leased[id]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range n {
		if id := fmt.Sprintf("wf/%d", i); leased[id] != 1 {
			t.Errorf("%s leased %d times, want once", id, leased[id])
		}
	}
	t.Logf("%d updates ran out of attempts", retries)
	checkRows(t, stores[0])
}

// TestClaimTimers_SkipsTheTimersAnotherTransactionHolds is the timers'
// claim: earliest first, due ones only, held rows skipped.
func TestClaimTimers_SkipsTheTimersAnotherTransactionHolds(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a, b := openNode(t, dsn, "a"), openNode(t, dsn, "b")
	update(t, a, func(tx engine.SharedTx) error {
		for i := range 4 {
			a := storetest.NewActivity("wf", fmt.Sprint(i), started, time.Duration(4-i)*time.Second, int64(i+1))
			if err := tx.PutActivity(a); err != nil {
				return err
			}
		}
		return nil
	})
	timerIDs := func(ts []engine.Timer) []string {
		var out []string
		for _, tm := range ts {
			out = append(out, tm.ID)
		}
		return out
	}
	held, release := make(chan []engine.Timer, 1), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- a.Update(func(tx engine.Tx) error {
			ts, err := tx.(engine.SharedTx).ClaimTimers(storetest.T0.Add(3*time.Second), 1)
			if err != nil {
				return err
			}
			held <- ts
			<-release
			return nil
		})
	}()
	first := <-held
	var second []engine.Timer
	update(t, b, func(tx engine.SharedTx) error {
		var err error
		second, err = tx.ClaimTimers(storetest.T0.Add(3*time.Second), 10)
		return err
	})
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// Leases end at T0+4s, 3s, 2s, 1s for activities 0..3.
	if diff := diff([]string{"3"}, timerIDs(first)); diff != "" {
		t.Errorf("first claim (-want +got):\n%s", diff)
	}
	if diff := diff([]string{"2", "1"}, timerIDs(second)); diff != "" {
		t.Errorf("claim while the first is held (-want +got):\n%s", diff)
	}
}

func TestNextTimer_IsTheEarliestDueAfterNow(t *testing.T) {
	t.Parallel()
	s := openNode(t, testpg.Database(t), "a")
	putScheduled(t, s, "wf", 3) // due T0, T0+1s, T0+2s
	update(t, s, func(tx engine.SharedTx) error {
		return tx.PutActivity(storetest.NewActivity("wf", "lease", started, 5*time.Second, 9))
	})
	at := func(d time.Duration) time.Time { return storetest.T0.Add(d) }
	s.View(func(tx engine.Tx) error {
		stx := tx.(engine.SharedTx)
		if due, ok, err := stx.NextTimer(at(0)); err != nil || !ok || !due.Equal(at(5*time.Second)) {
			t.Errorf("NextTimer(T0) = %v, %v, %v; want T0+5s (the lease)", due, ok, err)
		}
		if _, ok, err := stx.NextTimer(at(5 * time.Second)); err != nil || ok {
			t.Errorf("NextTimer(T0+5s) = %v, %v; want none", ok, err)
		}
		return nil
	})
}

// TestReserveIDs_BlocksOfThreeStoresAtOnceNeverOverlap reserves blocks of
// varying size from three stores at once, in transactions some of which
// roll back: no id is handed out twice.
func TestReserveIDs_BlocksOfThreeStoresAtOnceNeverOverlap(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	var (
		mu     sync.Mutex
		blocks [][2]int64
		wg     sync.WaitGroup
	)
	for i := range 3 {
		s := openNode(t, dsn, fmt.Sprint("node-", i))
		for w := range 2 {
			wg.Go(func() {
				for j := range 40 {
					n := int64(1 + (i*7+w*3+j)%50)
					var first int64
					err := s.Update(func(tx engine.Tx) error {
						var err error
						first, err = tx.(engine.SharedTx).ReserveIDs(n)
						if err == nil && j%5 == 0 {
							return errRollBack
						}
						return err
					})
					if err != nil && !errors.Is(err, errRollBack) {
						t.Error(err)
						return
					}
					mu.Lock()
					blocks = append(blocks, [2]int64{first, first + n})
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	slices.SortFunc(blocks, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	for i := 1; i < len(blocks); i++ {
		if blocks[i][0] < blocks[i-1][1] {
			t.Fatalf("blocks [%d, %d) and [%d, %d) overlap", blocks[i-1][0], blocks[i-1][1], blocks[i][0], blocks[i][1])
		}
	}
	if len(blocks) != 3*2*40 || blocks[0][0] != 1 {
		t.Errorf("%d blocks, the first from %d; want 240 from 1", len(blocks), blocks[0][0])
	}
	s := openNode(t, dsn, "reader")
	s.View(func(tx engine.Tx) error {
		if n, err := tx.Counter(); err != nil || n != blocks[len(blocks)-1][1]-1 {
			t.Errorf("Counter = %d, %v; want the last id reserved, %d", n, err, blocks[len(blocks)-1][1]-1)
		}
		return nil
	})
}

var errRollBack = errors.New("rolled back on purpose")

// heard is what one Listen received.
type heard struct {
	notices chan engine.Notice
	resyncs chan struct{}
}

func listen(t *testing.T, s *Store) *heard {
	t.Helper()
	h := &heard{notices: make(chan engine.Notice, 100), resyncs: make(chan struct{}, 10)}
	stop := s.Listen(func(n engine.Notice) { h.notices <- n }, func() { h.resyncs <- struct{}{} })
	t.Cleanup(stop)
	return h
}

// next returns the next notice h heard, failing the test after waitFor.
func (h *heard) next(t *testing.T, who string) engine.Notice {
	t.Helper()
	select {
	case n := <-h.notices:
		return n
	case <-time.After(waitFor):
		t.Fatalf("%s heard nothing in %s", who, waitFor)
		return engine.Notice{}
	}
}

// marker is a notice naming one closed workflow.
func marker(name string) engine.Notice { return engine.Notice{Closed: []string{name}} }

func notify(t *testing.T, s *Store, n engine.Notice) {
	t.Helper()
	update(t, s, func(tx engine.SharedTx) error { return tx.Notify(n) })
}

// wantMarker checks that the next notice h heard is marker(name) from node.
func (h *heard) wantMarker(t *testing.T, who, name, node string) {
	t.Helper()
	got := h.next(t, who)
	if diff := diff(engine.Notice{Node: node, Closed: []string{name}}, got); diff != "" {
		t.Errorf("%s heard (-want +got):\n%s", who, diff)
	}
}

// TestNotify_ReachesTheOtherNodesAtCommitOnly: the other stores hear a
// notice once its transaction commits, whole; the sender does not hear its
// own; nothing is heard from a transaction that rolled back or from an
// attempt Update ran again. Notices arrive in commit order, so the next one
// heard shows that nothing else came before it.
func TestNotify_ReachesTheOtherNodesAtCommitOnly(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a, b, c := openNode(t, dsn, "a"), openNode(t, dsn, "b"), openNode(t, dsn, "c")
	ha, hb, hc := listen(t, a), listen(t, b), listen(t, c)

	sent := engine.Notice{
		Queued: []engine.QueuedNotice{
			{Kind: engine.ActivityTask, Queue: "q", Due: storetest.T0.Add(time.Minute)},
			{Kind: engine.WorkflowTask, Queue: "wq"},
		},
		Closed:     []string{"wf-1"},
		Activities: []engine.ActivityKey{{WorkflowID: "wf-1", ActivityID: "a-1"}, {WorkflowID: "wf-2", ActivityID: "ü 2"}},
		Workflows:  []string{"wf-1", "wf-2"},
		Overrides:  true, Operations: true, OperationSeqs: []int64{7, 9},
		Audits: []engine.AuditKey{{Time: storetest.T0.Add(time.Nanosecond), ID: 11}},
	}
	// a notifies and holds its transaction open while c commits a notice.
	notified, commit := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- a.Update(func(tx engine.Tx) error {
			if err := tx.(engine.SharedTx).Notify(sent); err != nil {
				return err
			}
			close(notified)
			<-commit
			return nil
		})
	}()
	<-notified
	notify(t, c, marker("before-commit"))
	hb.wantMarker(t, "b", "before-commit", "c") // not a's: it has not committed
	close(commit)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	// The operations and audit records come in a notice of their own,
	// after the rest (a node of the first version of notices loses only
	// them).
	want := sent
	want.Node, want.OperationSeqs, want.Audits = "a", nil, nil
	ops := engine.Notice{Node: "a", OperationSeqs: sent.OperationSeqs, Audits: sent.Audits}
	for who, h := range map[string]*heard{"b": hb, "c": hc} {
		for _, want := range []engine.Notice{want, ops} {
			if diff := diff(want, h.next(t, who)); diff != "" {
				t.Errorf("%s heard (-want +got):\n%s", who, diff)
			}
		}
	}

	// A rollback sends nothing.
	err := a.Update(func(tx engine.Tx) error {
		if err := tx.(engine.SharedTx).Notify(marker("rolled-back")); err != nil {
			return err
		}
		return errRollBack
	})
	if !errors.Is(err, errRollBack) {
		t.Fatalf("Update = %v, want the rollback", err)
	}
	// The first attempt conflicts with a transaction that commits in
	// between, and Update runs fn again: only the second attempt's notice
	// goes out.
	calls := 0
	update(t, a, func(tx engine.SharedTx) error {
		calls++
		if err := tx.Notify(marker(fmt.Sprint("attempt-", calls))); err != nil {
			return err
		}
		n, err := tx.Counter()
		if err != nil {
			return err
		}
		if calls == 1 {
			if err := a.Update(func(tx engine.Tx) error { return tx.SetCounter(n + 100) }); err != nil {
				return err
			}
		}
		return tx.SetCounter(n + 1)
	})
	if calls != 2 {
		t.Fatalf("fn ran %d times, want 2 (one conflict)", calls)
	}
	notify(t, b, marker("end"))

	ha.wantMarker(t, "a", "before-commit", "c")
	ha.wantMarker(t, "a", "end", "b")
	hb.wantMarker(t, "b", "attempt-2", "a")
	hc.wantMarker(t, "c", "attempt-2", "a")
	hc.wantMarker(t, "c", "end", "b")
	select {
	case n := <-hb.notices:
		t.Errorf("b heard its own notice or one more: %+v", n)
	default:
	}
}

// TestNotify_ANoticeOverThePayloadLimitArrivesWhole sends a notice whose
// encoding is many times PostgreSQL's 8000-byte limit, then a small one:
// the listener hands on the first whole, then the second.
func TestNotify_ANoticeOverThePayloadLimitArrivesWhole(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a, b := openNode(t, dsn, "a"), openNode(t, dsn, "b")
	hb := listen(t, b)
	big := bigNotice(3000)
	if parts := len(encodeNotice(big, "a", 1, 1)); parts < 5 {
		t.Fatalf("the notice takes %d parts, want it well over the limit", parts)
	}
	update(t, a, func(tx engine.SharedTx) error {
		if err := tx.Notify(big); err != nil {
			return err
		}
		return tx.Notify(marker("second"))
	})
	want := big
	want.Node = "a"
	if diff := diff(want, hb.next(t, "b")); diff != "" {
		t.Errorf("b heard (-want +got):\n%s", diff)
	}
	hb.wantMarker(t, "b", "second", "a")
}

// bigNotice names n activities, workflows and queues.
func bigNotice(n int) engine.Notice {
	var big engine.Notice
	for i := range n {
		wf := fmt.Sprintf("workflow-%06d", i)
		big.Activities = append(big.Activities, engine.ActivityKey{WorkflowID: wf, ActivityID: fmt.Sprint("activity-", i)})
		big.Workflows = append(big.Workflows, wf)
		if i%10 == 0 {
			big.Queued = append(big.Queued, engine.QueuedNotice{Kind: engine.ActivityTask, Queue: fmt.Sprint("queue-", i),
				Due: storetest.T0.Add(time.Duration(i) * time.Millisecond)})
			big.Closed = append(big.Closed, wf)
		}
	}
	big.Overrides = true
	return big
}

// TestListen_ConnectsAgainAfterItsBackendIsTerminated ends the listening
// connection's backend from the server side: the listener connects again,
// calls resync once it listens, and hears the notices sent after.
func TestListen_ConnectsAgainAfterItsBackendIsTerminated(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a, b := openNode(t, dsn, "a"), openNode(t, dsn, "b")
	hb := listen(t, b)
	notify(t, a, marker("before"))
	hb.wantMarker(t, "b", "before", "a")

	var terminated int
	err := a.pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN `+noticeChannel+`'`).Scan(&terminated)
	if err != nil || terminated != 1 {
		t.Fatalf("terminated %d listening backends, %v; want 1", terminated, err)
	}
	select {
	case <-hb.resyncs:
	case <-time.After(waitFor):
		t.Fatalf("no resync %s after the backend was terminated", waitFor)
	}
	notify(t, a, marker("after"))
	hb.wantMarker(t, "b", "after", "a")
	if len(hb.resyncs) != 0 {
		t.Errorf("resync called %d more times", len(hb.resyncs))
	}
}

// TestListen_StopsWithClose: Close ends every listener (its connection
// gone from the server), and Listen on a closed store does nothing.
func TestListen_StopsWithClose(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a := openNode(t, dsn, "a")
	b, err := Open(dsn, Options{Node: "b"})
	if err != nil {
		t.Fatal(err)
	}
	listen(t, b)
	listening := func() int {
		var n int
		if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN `+noticeChannel+`'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := listening(); n != 1 {
		t.Fatalf("%d listening connections, want 1", n)
	}
	b.Close()
	deadline := time.Now().Add(waitFor)
	for listening() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the listening connection is still there %s after Close", waitFor)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Listen(func(engine.Notice) { t.Error("a closed store heard a notice") }, nil)()
}

// TestActivityCounts_WrittenThroughTwoNodesSum moves activities through
// two stores: each writes its own rows, and the counts read through either
// are the sums.
func TestActivityCounts_WrittenThroughTwoNodesSum(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a, b := openNode(t, dsn, "a"), openNode(t, dsn, "b")
	putScheduled(t, a, "wf", 3)
	update(t, b, func(tx engine.SharedTx) error {
		for _, id := range []string{"0", "1"} {
			if err := tx.PutActivity(storetest.NewActivity("wf", id, started, time.Minute, 9)); err != nil {
				return err
			}
		}
		return tx.DeleteActivity("wf", "2")
	})
	update(t, a, func(tx engine.SharedTx) error { return tx.DeleteActivity("wf", "0") })
	for _, s := range []*Store{a, b} {
		s.View(func(tx engine.Tx) error {
			got := map[string]int64{}
			kept, err := tx.ActivityCounts(func(q string, st durablev1.ActivityState, n int64) bool {
				got[fmt.Sprintf("%s/%s", q, st)] = n
				return true
			})
			if err != nil || !kept {
				t.Fatalf("ActivityCounts = %v, %v", kept, err)
			}
			if diff := diff(map[string]int64{"q/ACTIVITY_STATE_STARTED": 1}, got); diff != "" {
				t.Errorf("counts through %s (-want +got):\n%s", s.Node(), diff)
			}
			return nil
		})
	}
	var rows int
	a.pool.QueryRow(context.Background(), "SELECT count(*) FROM activity_counts").Scan(&rows)
	if rows < 2 {
		t.Errorf("%d rows of counts, want rows of both nodes", rows)
	}
	checkRows(t, a)
}

// TestLatencyHours_PartsOfTwoNodesMerge: each node adds to an hour in its
// own part (read back by GetLatencyHour in an update); every other read
// merges the parts, across pages too, and a delete removes them all.
func TestLatencyHours_PartsOfTwoNodesMerge(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a, b := openNode(t, dsn, "a"), openNode(t, dsn, "b")
	hour := storetest.T0.Add(2 * time.Hour)
	add := func(s *Store, typ string, attempts, failures, maxNs int64, buckets ...int64) {
		t.Helper()
		update(t, s, func(tx engine.SharedTx) error {
			l, err := tx.GetLatencyHour(typ, hour)
			if errors.Is(err, engine.ErrNotFound) {
				l, err = &durablev1.LatencyRecord{ActivityType: typ, Hour: timestamppb.New(hour)}, nil
			}
			if err != nil {
				return err
			}
			l.Attempts += attempts
			l.Failures += failures
			l.MaxNs = max(l.MaxNs, maxNs)
			for i, n := range buckets {
				if i >= len(l.Buckets) {
					l.Buckets = append(l.Buckets, 0)
				}
				l.Buckets[i] += n
			}
			return tx.PutLatencyHour(l)
		})
	}
	add(a, "Charge", 3, 1, 50, 1, 2)
	add(b, "Charge", 2, 0, 90, 0, 0, 2)
	add(a, "Charge", 1, 0, 10, 1)
	add(b, "Ship", 1, 0, 5, 1)
	want := &durablev1.LatencyRecord{ActivityType: "Charge", Hour: timestamppb.New(hour), Attempts: 6, Failures: 1, MaxNs: 90, Buckets: []int64{2, 2, 2}}
	wantShip := &durablev1.LatencyRecord{ActivityType: "Ship", Hour: timestamppb.New(hour), Attempts: 1, MaxNs: 5, Buckets: []int64{1}}

	a.pageSize = 1 // every part a page: the merge spans pages
	a.View(func(tx engine.Tx) error {
		l, err := tx.GetLatencyHour("Charge", hour)
		if err != nil {
			return err
		}
		if diff := diff(want, l); diff != "" {
			t.Errorf("GetLatencyHour (-want +got):\n%s", diff)
		}
		var all []*durablev1.LatencyRecord
		if err := tx.LatencyHours(time.Time{}, func(l *durablev1.LatencyRecord) bool { all = append(all, l); return true }); err != nil {
			return err
		}
		if diff := diff([]*durablev1.LatencyRecord{wantShip, want}, all); diff != "" {
			t.Errorf("LatencyHours (-want +got):\n%s", diff)
		}
		var one []*durablev1.LatencyRecord
		tx.LatencyHours(time.Time{}, func(l *durablev1.LatencyRecord) bool { one = append(one, l); return false })
		if len(one) != 1 {
			t.Errorf("LatencyHours went on after fn returned false: %d calls", len(one))
		}
		before, err := tx.LatencyHoursBefore(hour.Add(time.Hour), 1)
		if err != nil {
			return err
		}
		if diff := diff([]*durablev1.LatencyRecord{wantShip}, before); diff != "" {
			t.Errorf("LatencyHoursBefore(limit 1) (-want +got):\n%s", diff)
		}
		before, err = tx.LatencyHoursBefore(hour.Add(time.Hour), 5)
		if err != nil {
			return err
		}
		if diff := diff([]*durablev1.LatencyRecord{wantShip, want}, before); diff != "" {
			t.Errorf("LatencyHoursBefore (-want +got):\n%s", diff)
		}
		return nil
	})
	update(t, b, func(tx engine.SharedTx) error {
		l, err := tx.GetLatencyHour("Charge", hour)
		if err != nil || l.GetAttempts() != 2 {
			t.Errorf("b's part of the hour: %d attempts, %v; want 2", l.GetAttempts(), err)
		}
		return tx.DeleteLatencyHour("Charge", hour)
	})
	a.View(func(tx engine.Tx) error {
		_, err := tx.GetLatencyHour("Charge", hour)
		if !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("GetLatencyHour after the delete = %v, want ErrNotFound", err)
		}
		return nil
	})
}

// TestOpen_RefusesTheNameOfALiveNodeAndTakesAStaleOne.
func TestOpen_RefusesTheNameOfALiveNodeAndTakesAStaleOne(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a := openNode(t, dsn, "a")
	if a.Node() != "a" {
		t.Errorf("Node() = %q, want a", a.Node())
	}
	_, err := Open(dsn, Options{Node: "a"})
	var nameErr *NodeNameError
	if !errors.As(err, &nameErr) || nameErr.Name != "a" || nameErr.Ago < 0 || nameErr.Ago >= AliveWithin {
		t.Fatalf("Open under a live node's name = %v, want a *NodeNameError naming a, seen within %s", err, AliveWithin)
	}
	if msg := err.Error(); !strings.Contains(msg, `"a"`) || !strings.Contains(msg, "ago") {
		t.Errorf("the refusal says %q; want it to name the node and how recently it was seen", msg)
	}

	// A node that died without closing: its name is free once AliveWithin
	// has passed since it was last seen.
	_, err = a.pool.Exec(context.Background(), `INSERT INTO nodes (name, started, last_seen, incarnation) VALUES
		('died', now() - interval '1 hour', now() - $1 * interval '1 microsecond', 1),
		('just-died', now() - interval '1 hour', now() - interval '1 second', 2)`, micros(AliveWithin+time.Second))
	if err != nil {
		t.Fatal(err)
	}
	openNode(t, dsn, "died")
	if _, err := Open(dsn, Options{Node: "just-died"}); !errors.As(err, &nameErr) {
		t.Errorf("Open under the name of a node seen 1s ago = %v, want a *NodeNameError", err)
	}

	// A node that closed frees its name at once.
	a.Close()
	openNode(t, dsn, "a")

	// No name: a fresh one each time.
	x, y := openNode(t, dsn, ""), openNode(t, dsn, "")
	if x.Node() == y.Node() || !strings.HasPrefix(x.Node(), "node-") {
		t.Errorf("unnamed stores are named %q and %q, want two different node-... names", x.Node(), y.Node())
	}
	ns, err := x.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range ns {
		names = append(names, n.Name)
	}
	want := []string{"a", "died", "just-died", x.Node(), y.Node()}
	slices.Sort(want)
	if diff := diff(want, names); diff != "" {
		t.Errorf("Nodes (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"line\nbreak", strings.Repeat("n", maxNodeName+1), "\xff"} {
		if s, err := Open(dsn, Options{Node: bad}); err == nil {
			s.Close()
			t.Errorf("Open under the name %q succeeded", bad)
		}
	}
}

// TestHeartbeat_KeepsLastSeenMoving waits for a store's last_seen to move
// on, as its heartbeat says it is alive.
func TestHeartbeat_KeepsLastSeenMoving(t *testing.T) {
	t.Parallel()
	s := openNode(t, testpg.Database(t), "a")
	seen := func() time.Time {
		ns, err := s.Nodes()
		if err != nil || len(ns) != 1 {
			t.Fatalf("Nodes = %v, %v", ns, err)
		}
		return ns[0].LastSeen
	}
	first := seen()
	deadline := time.Now().Add(waitFor)
	for !seen().After(first) {
		if time.Now().After(deadline) {
			t.Fatalf("last_seen still %s after %s", first, waitFor)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMigration_From0002KeepsTheCountsAndIdsGrowPastTheCounter brings a
// database to version 2 with data in it, then opens it: the counts and
// latency hours written before are read as they were (rows of the node
// named ""), and ids are handed out after the old counter.
func TestMigration_From0002KeepsTheCountsAndIdsGrowPastTheCounter(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	ctx := context.Background()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateTo(ctx, pool, ms[:2]); err != nil {
		t.Fatal(err)
	}
	old := &durablev1.LatencyRecord{ActivityType: "Charge", Hour: timestamppb.New(storetest.T0), Attempts: 4, MaxNs: 7, Buckets: []int64{4}}
	v, err := marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	batch := &pgx.Batch{}
	batch.Queue("INSERT INTO activity_counts (state, task_queue, n) VALUES (1, 'q', 3), (2, 'q', 2)")
	batch.Queue("INSERT INTO counter (n) VALUES (41)")
	batch.Queue("INSERT INTO latency_hours (activity_type, hour, record) VALUES ('Charge', $1, $2)", nanos(storetest.T0), v)
	if err := pool.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatal(err)
	}
	pool.Close()

	s := openNode(t, dsn, "a")
	s.View(func(tx engine.Tx) error {
		got := map[string]int64{}
		tx.ActivityCounts(func(q string, st durablev1.ActivityState, n int64) bool {
			got[fmt.Sprintf("%s/%d", q, st)] = n
			return true
		})
		if diff := diff(map[string]int64{"q/1": 3, "q/2": 2}, got); diff != "" {
			t.Errorf("counts after the migration (-want +got):\n%s", diff)
		}
		if n, err := tx.Counter(); err != nil || n != 41 {
			t.Errorf("Counter = %d, %v; want 41", n, err)
		}
		l, err := tx.GetLatencyHour("Charge", storetest.T0)
		if err != nil || l.GetAttempts() != 4 {
			t.Errorf("the hour written before: %v, %v", l, err)
		}
		return nil
	})
	update(t, s, func(tx engine.SharedTx) error {
		first, err := tx.ReserveIDs(10)
		if err != nil || first != 42 {
			t.Errorf("ReserveIDs(10) = %d, %v; want 42, after the counter", first, err)
		}
		// This node's part of the old hour is its own, empty.
		if _, err := tx.GetLatencyHour("Charge", storetest.T0); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("this node's part of an hour written before = %v, want ErrNotFound", err)
		}
		return tx.PutLatencyHour(&durablev1.LatencyRecord{ActivityType: "Charge", Hour: timestamppb.New(storetest.T0), Attempts: 1, Buckets: []int64{1}})
	})
	s.View(func(tx engine.Tx) error {
		l, err := tx.GetLatencyHour("Charge", storetest.T0)
		if err != nil || l.GetAttempts() != 5 {
			t.Errorf("the hour after this node added to it: %d attempts, %v; want 5", l.GetAttempts(), err)
		}
		if n, err := tx.Counter(); err != nil || n != 51 {
			t.Errorf("Counter after ReserveIDs = %d, %v; want 51", n, err)
		}
		return nil
	})
}

// TestClaims_ReadTheirIndexes reads the plans of the claims and of the
// next due times on tables large enough that a sequential scan and a sort
// would cost more: each must walk its index in order.
func TestClaims_ReadTheirIndexes(t *testing.T) {
	t.Parallel()
	s := openNode(t, testpg.Database(t), "a")
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `
		INSERT INTO queue (kind, task_queue, due, seq, workflow_id, activity_id)
			SELECT 2, ('q' || (i % 20))::bytea, i * 1000, i, ('wf' || i)::bytea, 'a'::bytea FROM generate_series(1, 20000) i;
		INSERT INTO timers (due, kind, workflow_id, id)
			SELECT i * 1000, 4, ('wf' || i)::bytea, 'a'::bytea FROM generate_series(1, 20000) i;
		ANALYZE queue; ANALYZE timers`)
	if err != nil {
		t.Fatal(err)
	}
	plans := []struct {
		name, sql, index string
		args             []any
	}{
		{"ClaimQueued", claimQueuedSQL, "queue_order", []any{int16(2), []byte("q7"), int64(5_000_000), 10}},
		{"ClaimQueued/activities", claimActivityTasksSQL, "queue_order", []any{int16(2), []byte("q7"), int64(5_000_000), 10}},
		{"ClaimQueued/workflows", claimWorkflowTasksSQL, "queue_order", []any{int16(1), []byte("q7"), int64(5_000_000), 10}},
		{"ClaimTimers", claimTimersSQL, "timers_order", []any{int64(5_000_000), 10}},
		{"NextTimer", nextTimerSQL, "timers_order", []any{int64(5_000_000)}},
	}
	for _, p := range plans {
		t.Run(p.name, func(t *testing.T) {
			plan := explain(t, s, p.sql, p.args...)
			uses := strings.Contains(plan, "Index Scan using "+p.index) || strings.Contains(plan, "Index Only Scan using "+p.index)
			if !uses || strings.Contains(plan, "Sort") {
				t.Errorf("the plan does not walk %s in order:\n%s", p.index, plan)
			}
		})
	}
}

// diff describes how got differs from want ("" when it does not): records
// compare as protobuf messages.
func diff(want, got any) string {
	same := reflect.DeepEqual(want, got)
	switch w := want.(type) {
	case *durablev1.LatencyRecord:
		same = proto.Equal(w, got.(*durablev1.LatencyRecord))
	case []*durablev1.LatencyRecord:
		g := got.([]*durablev1.LatencyRecord)
		same = slices.EqualFunc(w, g, func(a, b *durablev1.LatencyRecord) bool { return proto.Equal(a, b) })
	}
	if same {
		return ""
	}
	return fmt.Sprintf("-%+v\n+%+v", want, got)
}

// explain returns the plan PostgreSQL runs for sql with args, one line per
// node: the plan of the statement prepared on a connection of the store's
// pool, as the store runs it (see planCacheMode), not a plan made for these
// arguments alone.
func explain(t *testing.T, s *Store, sql string, args ...any) string {
	t.Helper()
	return explainOn(t, s, false, sql, args)
}

// explainKept returns the plan the store's connection keeps for sql, made
// when the store first ran it there; the store must have one connection. A
// statement the connection did not keep (pgx sends one without arguments
// unprepared, planned at each run) is explained as explain does.
func explainKept(t *testing.T, s *Store, sql string, args ...any) string {
	t.Helper()
	return explainOn(t, s, true, sql, args)
}

func explainOn(t *testing.T, s *Store, kept bool, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var name string
	if kept {
		err := conn.QueryRow(ctx, "SELECT name FROM pg_prepared_statements WHERE statement = $1", sql).Scan(&name)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
	}
	if name == "" {
		name = "explained"
		if _, err := conn.Conn().Prepare(ctx, name, sql); err != nil {
			t.Fatal(err)
		}
		defer conn.Conn().Deallocate(ctx, name)
	}
	return explainPrepared(t, conn.Conn(), name, args)
}

// explainPrepared returns the plan of the statement prepared on conn as
// name, run with args.
func explainPrepared(t *testing.T, conn *pgx.Conn, name string, args []any) string {
	t.Helper()
	params := make([]string, len(args))
	for i, a := range args {
		params[i] = sqlLiteral(t, a)
	}
	// EXECUTE takes no parameters of the statement around it: the
	// arguments go as literals, which only choose a custom plan should the
	// plan cache make one.
	explain := "EXPLAIN EXECUTE " + name
	if len(params) > 0 {
		explain += " (" + strings.Join(params, ", ") + ")"
	}
	rows, err := conn.Query(context.Background(), explain)
	if err != nil {
		t.Fatalf("%s: %v", explain, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// sqlLiteral writes an argument of the store's statements as an SQL
// literal.
func sqlLiteral(t *testing.T, a any) string {
	t.Helper()
	switch v := a.(type) {
	case nil:
		return "NULL"
	case []byte:
		return fmt.Sprintf("'\\x%x'::bytea", v)
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case int, int16, int64, bool:
		return fmt.Sprint(v)
	case *int64:
		if v == nil {
			return "NULL"
		}
		return fmt.Sprint(*v)
	}
	rv := reflect.ValueOf(a)
	if rv.Kind() != reflect.Slice {
		t.Fatalf("sqlLiteral: %T", a)
	}
	if rv.Len() == 0 {
		return "'{}'"
	}
	elems := make([]string, rv.Len())
	for i := range elems {
		elems[i] = sqlLiteral(t, rv.Index(i).Interface())
	}
	if strings.Trim(strings.Join(elems, ""), "NUL") == "" {
		// Of no type an ARRAY[...] could take from its elements: the
		// statement's parameter gives it one.
		return "'{" + strings.Join(elems, ", ") + "}'"
	}
	return "ARRAY[" + strings.Join(elems, ", ") + "]"
}

// TestSharePollers_EachNodeReplacesItsOwnRows: what a node shares replaces
// what it shared before and leaves the other nodes' rows alone; Pollers
// returns the rows of the nodes named, whatever bytes the names hold.
func TestSharePollers_EachNodeReplacesItsOwnRows(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a, b := openNode(t, dsn, "a"), openNode(t, dsn, "b")
	at := func(s int) time.Time { return storetest.T0.Add(time.Duration(s)*time.Second + time.Nanosecond) }
	odd := "q \x00\xff ü"
	p1 := engine.PollerState{Queue: odd, Kind: engine.ActivityTask, Identity: "w1@host", Parked: true, Last: at(1)}
	p2 := engine.PollerState{Queue: "q", Kind: engine.WorkflowTask, Identity: "w1@host", Last: at(2)}
	p3 := engine.PollerState{Queue: "q", Kind: engine.ActivityTask, Identity: "w2@host", Parked: true, Last: at(3)}
	update(t, a, func(tx engine.SharedTx) error { return tx.SharePollers([]engine.PollerState{p1, p2}) })
	update(t, b, func(tx engine.SharedTx) error { return tx.SharePollers([]engine.PollerState{p3}) })
	read := func(nodes ...string) []engine.PollerState {
		t.Helper()
		var got []engine.PollerState
		update(t, b, func(tx engine.SharedTx) error {
			var err error
			got, err = tx.Pollers(nodes)
			return err
		})
		slices.SortFunc(got, func(x, y engine.PollerState) int { return cmp.Compare(x.Last.UnixNano(), y.Last.UnixNano()) })
		return got
	}
	if got := read("a"); !reflect.DeepEqual(got, []engine.PollerState{p1, p2}) {
		t.Errorf("a's = %+v, want %+v", got, []engine.PollerState{p1, p2})
	}
	if got := read("a", "b", "gone"); !reflect.DeepEqual(got, []engine.PollerState{p1, p2, p3}) {
		t.Errorf("a's and b's = %+v", got)
	}
	p2.Parked, p2.Last = true, at(4)
	update(t, a, func(tx engine.SharedTx) error { return tx.SharePollers([]engine.PollerState{p2}) })
	if got := read("a", "b"); !reflect.DeepEqual(got, []engine.PollerState{p3, p2}) {
		t.Errorf("after a shared again = %+v, want b's and a's new one", got)
	}
	update(t, a, func(tx engine.SharedTx) error { return tx.SharePollers(nil) })
	if got := read("a"); len(got) != 0 {
		t.Errorf("after a shared none = %+v", got)
	}
	if got := read(); got != nil {
		t.Errorf("no node named = %+v", got)
	}
}
