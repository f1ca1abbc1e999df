package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	badgerstore "github.com/tinyllm/durable/store/badger"
)

// faultStore is a store whose next commit that writes a workflow, or next
// sync, fails with an error the test chooses; it counts the commits that
// reached it.
type faultStore struct {
	engine.Store
	mu        sync.Mutex
	updateErr error
	syncErr   error
	updates   int
}

func (s *faultStore) failNextUpdate(err error) { s.mu.Lock(); s.updateErr = err; s.mu.Unlock() }
func (s *faultStore) failNextSync(err error)   { s.mu.Lock(); s.syncErr = err; s.mu.Unlock() }

func (s *faultStore) commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates
}

func (s *faultStore) Update(fn func(engine.Tx) error) error {
	s.mu.Lock()
	injected := s.updateErr
	s.updates++
	s.mu.Unlock()
	if injected == nil {
		return s.Store.Update(fn)
	}
	// Only a transaction that writes a workflow fails (the janitors' own
	// commits at start pass): its transitions run, then the commit fails
	// and the transaction is discarded, as a store discards one it could
	// not write.
	return s.Store.Update(func(tx engine.Tx) error {
		wtx := &workflowWriteTx{Tx: tx}
		if err := fn(wtx); err != nil || !wtx.wrote {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.updateErr == nil {
			return nil
		}
		s.updateErr = nil
		return injected
	})
}

// workflowWriteTx notes whether a transaction wrote a workflow record.
type workflowWriteTx struct {
	engine.Tx
	wrote bool
}

func (t *workflowWriteTx) PutWorkflow(w *durablev1.WorkflowRecord) error {
	t.wrote = true
	return t.Tx.PutWorkflow(w)
}

func (s *faultStore) Sync() error {
	s.mu.Lock()
	injected := s.syncErr
	s.syncErr = nil
	s.mu.Unlock()
	if injected != nil {
		return injected
	}
	return s.Store.Sync()
}

// setupFaulty is setup over a faultStore.
func setupFaulty(t *testing.T, opts engine.Options) (*harness, *faultStore) {
	t.Helper()
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	fs := &faultStore{Store: st}
	clock := engine.NewFakeClock(t0)
	opts.Clock = clock
	opts.Jitter = func(d time.Duration) time.Duration { return d }
	e, err := engine.New(fs, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Close()
		st.Close()
	})
	return &harness{t: t, e: e, clock: clock, store: fs}, fs
}

var errDiskFull = fmt.Errorf("%w: 10 MiB free, below the reserve of 256 MiB", engine.ErrNoSpace)

func startErr(h *harness, wf string) error {
	_, err := h.e.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{WorkflowId: wf, WorkflowType: "T", TaskQueue: "q"})
	return err
}

func TestRefusedWritesFailWithTheReasonWhileReadsGoOn(t *testing.T) {
	t.Parallel()
	var changes []error
	h, fs := setupFaulty(t, engine.Options{WritesChangedFunc: func(err error) { changes = append(changes, err) }})
	h.start("before", "T")

	h.e.RefuseWrites(errDiskFull)
	commits := fs.commits()
	err := startErr(h, "during")
	if !errors.Is(err, engine.ErrNoSpace) || !errors.Is(err, engine.ErrWritesRefused) {
		t.Fatalf("start while refused: %v, want ErrNoSpace and ErrWritesRefused", err)
	}
	if err.Error() != errDiskFull.Error() {
		t.Errorf("refusal says %q, want the reason %q", err, errDiskFull)
	}
	if fs.commits() != commits {
		t.Errorf("a refused start reached the store")
	}
	if got := h.describe("before").GetWorkflow().GetWorkflowId(); got != "before" {
		t.Errorf("describe while refused: %q", got)
	}
	if _, err := h.e.DescribeWorkflow(context.Background(), &durablev1.DescribeWorkflowRequest{WorkflowId: "during"}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("the refused start left a workflow behind: %v", err)
	}
	if !errors.Is(h.e.WritesRefused(), engine.ErrNoSpace) {
		t.Errorf("WritesRefused = %v", h.e.WritesRefused())
	}

	h.e.AllowWrites()
	if err := startErr(h, "after"); err != nil {
		t.Fatalf("start once allowed: %v", err)
	}
	if h.e.WritesRefused() != nil {
		t.Errorf("WritesRefused after AllowWrites = %v", h.e.WritesRefused())
	}
	if len(changes) != 3 || changes[0] != nil || !errors.Is(changes[1], engine.ErrNoSpace) || changes[2] != nil {
		t.Errorf("WritesChangedFunc heard %v, want nil at start, the refusal, then nil", changes)
	}
}

func TestPollsHandOutNothingWhileWritesAreRefusedAndWakeWhenAllowed(t *testing.T) {
	t.Parallel()
	h, _ := setupFaulty(t, engine.Options{})
	h.start("wf", "T")
	h.e.RefuseWrites(errDiskFull)
	if wt := h.pollWorkflow(); wt != nil {
		t.Fatalf("a poll leased a workflow task while writes were refused")
	}

	got := make(chan *durablev1.PollWorkflowTaskResponse, 1)
	go func() {
		r, err := h.e.PollWorkflowTask(context.Background(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	waitFor(t, "the poll to park", func() bool { return len(h.e.Gauges().Polls) == 1 })
	h.e.AllowWrites()
	select {
	case r := <-got:
		if r.GetWorkflowId() != "wf" {
			t.Errorf("the parked poll got %q, want the waiting task of wf", r.GetWorkflowId())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked poll was not woken when writes were allowed")
	}
}

func TestTimersWaitWhileWritesAreRefused(t *testing.T) {
	t.Parallel()
	h, _ := setupFaulty(t, engine.Options{})
	h.startWithActivity("wf", &durablev1.ActivityOptions{StartToCloseTimeout: dur(10 * time.Second)})
	if h.pollActivity() == nil {
		t.Fatal("no activity task")
	}
	h.e.RefuseWrites(errDiskFull)
	h.clock.Advance(time.Minute)
	pa := h.describe("wf").GetPendingActivities()
	if len(pa) != 1 || pa[0].GetState() != durablev1.ActivityState_ACTIVITY_STATE_STARTED {
		t.Fatalf("while refused the lease timed out: %v", pa)
	}
	h.e.AllowWrites()
	pa = h.describe("wf").GetPendingActivities()
	if len(pa) != 1 || pa[0].GetState() != durablev1.ActivityState_ACTIVITY_STATE_RETRYING || pa[0].GetLastFailure().GetType() != engine.TimeoutStartToClose {
		t.Fatalf("once allowed, the lease did not time out: %v", pa)
	}
}

func TestStoreWriteErrorIsACleanRefusalAndAsksForACheck(t *testing.T) {
	t.Parallel()
	storeErr := fmt.Errorf("%w: write 00002.mem: no space left on device", engine.ErrNoSpace)
	var heard []error
	var h *harness
	h, fs := setupFaulty(t, engine.Options{WriteFailedFunc: func(err error) {
		heard = append(heard, err)
		h.e.RefuseWrites(errDiskFull) // what a monitor that now finds the disk full does
	}})
	h.start("before", "T")

	fs.failNextUpdate(storeErr)
	err := startErr(h, "failed")
	if !errors.Is(err, engine.ErrNoSpace) {
		t.Fatalf("start whose commit failed: %v, want ErrNoSpace", err)
	}
	if len(heard) != 1 || !errors.Is(heard[0], engine.ErrNoSpace) {
		t.Errorf("WriteFailedFunc heard %v, want the store's error", heard)
	}
	if _, err := h.e.DescribeWorkflow(context.Background(), &durablev1.DescribeWorkflowRequest{WorkflowId: "failed"}); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("the failed start left a workflow behind: %v", err)
	}
	commits := fs.commits()
	if err := startErr(h, "next"); !errors.Is(err, engine.ErrWritesRefused) {
		t.Errorf("the start after the failure: %v, want the refusal", err)
	}
	if fs.commits() != commits {
		t.Errorf("the start after the failure reached the store")
	}
}

func TestStoreWriteErrorWithoutRefusalIsTheStoresError(t *testing.T) {
	t.Parallel()
	storeErr := errors.New("disk on fire")
	h, fs := setupFaulty(t, engine.Options{WriteFailedFunc: func(error) {}})
	fs.failNextUpdate(storeErr)
	if err := startErr(h, "wf"); !errors.Is(err, storeErr) || errors.Is(err, engine.ErrWritesRefused) {
		t.Fatalf("start whose commit failed: %v, want the store's error and no refusal", err)
	}
	if err := startErr(h, "wf"); err != nil {
		t.Fatalf("the retried start: %v", err)
	}
}

func TestFailedSyncHaltsWritesUntilRestart(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var changes []error
	h, fs := setupFaulty(t, engine.Options{
		Logger:            slog.New(slog.NewTextHandler(&logs, nil)),
		WritesChangedFunc: func(err error) { changes = append(changes, err) },
	})
	fs.failNextSync(errors.New("input/output error"))
	err := startErr(h, "wf")
	if !errors.Is(err, engine.ErrWritesRefused) || errors.Is(err, engine.ErrNoSpace) {
		t.Fatalf("start whose sync failed: %v, want a refusal that is not for space", err)
	}
	h.e.AllowWrites()
	if err := startErr(h, "next"); !errors.Is(err, engine.ErrWritesRefused) {
		t.Errorf("AllowWrites lifted the halt of a failed sync: %v", err)
	}
	if len(changes) != 2 || changes[0] != nil || changes[1] == nil {
		t.Errorf("WritesChangedFunc heard %v, want nil at start, then one refusal", changes)
	}
	if n := bytes.Count(logs.Bytes(), []byte("level=ERROR")); n != 1 {
		t.Errorf("%d ERROR lines, want 1:\n%s", n, logs.String())
	}
}

func TestFailedSyncForWantOfSpaceIsNoSpace(t *testing.T) {
	t.Parallel()
	h, fs := setupFaulty(t, engine.Options{})
	fs.failNextSync(fmt.Errorf("%w: msync: no space left on device", engine.ErrNoSpace))
	if err := startErr(h, "wf"); !errors.Is(err, engine.ErrNoSpace) {
		t.Fatalf("start whose sync failed for space: %v, want ErrNoSpace", err)
	}
}

func TestReadOnlyEngineServesReadsAndRefusesWrites(t *testing.T) {
	t.Parallel()
	st, err := badgerstore.Open("", badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := engine.NewFakeClock(t0)
	e, err := engine.New(st, engine.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{WorkflowId: "wf", WorkflowType: "T", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	e.Close()

	var logs bytes.Buffer
	var changes []error
	ro, err := engine.New(st, engine.Options{Clock: clock, ReadOnly: errDiskFull, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		WritesChangedFunc: func(err error) { changes = append(changes, err) }})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.DescribeWorkflow(context.Background(), &durablev1.DescribeWorkflowRequest{WorkflowId: "wf"}); err != nil {
		t.Errorf("describe on a read-only engine: %v", err)
	}
	ro.AllowWrites()
	_, err = ro.StartWorkflow(context.Background(), &durablev1.StartWorkflowRequest{WorkflowId: "b", WorkflowType: "T", TaskQueue: "q"})
	if !errors.Is(err, engine.ErrNoSpace) {
		t.Errorf("start on a read-only engine: %v, want ErrNoSpace", err)
	}
	r, err := ro.PollWorkflowTask(now(), &durablev1.PollWorkflowTaskRequest{TaskQueue: "q"})
	if err != nil || len(r.GetTaskToken()) != 0 {
		t.Errorf("poll on a read-only engine: %v, %v; want nothing", r, err)
	}
	ro.Close()
	if len(changes) != 1 || !errors.Is(changes[0], engine.ErrNoSpace) {
		t.Errorf("WritesChangedFunc heard %v, want the read-only refusal once, at start", changes)
	}
	if logs.Len() > 0 {
		t.Errorf("the read-only engine logged:\n%s", logs.String())
	}
}

// waitFor waits up to 10 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
