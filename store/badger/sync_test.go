package badger

import (
	"errors"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
)

// fakeFsync is a syncFunc whose calls block until the test releases them.
type fakeFsync struct {
	release chan error
}

func (f *fakeFsync) sync() error { return <-f.release }

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGroupSync_LateCallersShareTheNextFsync(t *testing.T) {
	t.Parallel()
	f := &fakeFsync{release: make(chan error)}
	g := newGroupSync(f.sync)
	defer g.close()

	first := make(chan error, 1)
	go func() { first <- g.Sync() }()
	waitFor(t, "the first fsync to start", func() bool { return g.runs() == 1 })

	late := make(chan error, 3)
	for range 3 {
		go func() { late <- g.Sync() }()
	}
	waitFor(t, "three callers to wait", func() bool { return g.pending() == 3 })

	f.release <- nil // the first fsync ends
	if err := <-first; err != nil {
		t.Fatalf("first Sync = %v", err)
	}
	// The late callers arrived while the first fsync ran: it must not
	// answer them. They share the second one, which has not ended yet.
	waitFor(t, "the second fsync to start", func() bool { return g.runs() == 2 })
	select {
	case err := <-late:
		t.Fatalf("a late caller returned (%v) before an fsync that started after it", err)
	default:
	}
	f.release <- nil
	for range 3 {
		if err := <-late; err != nil {
			t.Errorf("late Sync = %v", err)
		}
	}
	if n := g.runs(); n != 2 {
		t.Errorf("%d fsyncs for four callers in two waves, want 2", n)
	}
}

func TestGroupSync_ErrorReachesEveryCallerOfTheBatch(t *testing.T) {
	t.Parallel()
	f := &fakeFsync{release: make(chan error)}
	g := newGroupSync(f.sync)
	defer g.close()

	blocker := make(chan error, 1)
	go func() { blocker <- g.Sync() }()
	waitFor(t, "the first fsync to start", func() bool { return g.runs() == 1 })
	batch := make(chan error, 2)
	for range 2 {
		go func() { batch <- g.Sync() }()
	}
	waitFor(t, "two callers to wait", func() bool { return g.pending() == 2 })
	f.release <- nil
	<-blocker
	disk := errors.New("disk on fire")
	f.release <- disk
	for range 2 {
		if err := <-batch; !errors.Is(err, disk) {
			t.Errorf("Sync = %v, want the fsync's error", err)
		}
	}
}

func TestGroupSync_CloseAnswersWaitersThenRefuses(t *testing.T) {
	t.Parallel()
	f := &fakeFsync{release: make(chan error)}
	g := newGroupSync(f.sync)

	first := make(chan error, 1)
	go func() { first <- g.Sync() }()
	waitFor(t, "the first fsync to start", func() bool { return g.runs() == 1 })
	waiting := make(chan error, 1)
	go func() { waiting <- g.Sync() }()
	waitFor(t, "a caller to wait", func() bool { return g.pending() == 1 })

	closed := make(chan struct{})
	go func() { g.close(); close(closed) }()
	f.release <- nil // first fsync
	f.release <- nil // the waiting caller's fsync, run before the loop stops
	<-closed
	if err := <-first; err != nil {
		t.Errorf("first Sync = %v", err)
	}
	if err := <-waiting; err != nil {
		t.Errorf("waiting Sync = %v", err)
	}
	if err := g.Sync(); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Sync after close = %v, want engine.ErrClosed", err)
	}
}

func TestStore_SyncIsNoOpWithoutDisk(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]Options{"InMemory": {InMemory: true}, "NoSync": {NoSync: true}} {
		s, err := Open(t.TempDir(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if s.sync != nil {
			t.Errorf("%s: store runs fsyncs", name)
		}
		if err := s.Sync(); err != nil {
			t.Errorf("%s: Sync = %v", name, err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("%s: Close = %v", name, err)
		}
	}
}
