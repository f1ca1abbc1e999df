package engine

import (
	"context"
	"errors"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// A Watch's snapshot streams: a reader goroutine reads it from one store
// view a chunk (snapshotChunk items) at a time and hands each chunk to the
// Watch, which sends it while the next one is read. What a snapshot costs
// the daemon at once is therefore a few chunks, whatever the store holds:
// the one being read, the one handed over (snapshotAhead) and the one being
// sent, which the stream's flow control holds until the client takes it.
//
// The snapshot-reader token (Engine.snapshotReads, snapshotReaders of them)
// is held while the snapshot is read, and let go whenever the reader has to
// wait for the client to take a chunk: the token bounds the CPU that
// snapshot reads take from the batcher and the polls, and a slow or stopped
// client never keeps another watcher from reading. While its client keeps
// up, a reader keeps the token from chunk to chunk, so that snapshots
// opened together finish one after another, as when they were read whole:
// were the token passed round at every chunk, each of them would take as
// long as all of them, and queue live events all that time. What bounds the
// views open at once is Options.MaxWatchers, since each registered watcher
// holds at most one. A view holds no more than its transaction while its
// reader waits (the store's scans read in pages and call back between them,
// see Tx.ScanActivities); on Badger that is a read timestamp, which keeps
// the versions written since from being compacted away until the view ends.
// On PostgreSQL it is a connection, which the commits need too: there a
// Watch first waits for one of the store's LongViews (LongViewStore).
//
// While the snapshot streams, the records changed after the view gather in
// the catch-up log, each in its last state (watch_catchup.go), which is
// bounded by what it holds, not by how many events were published: a
// snapshot may take as long as its client takes to read it. Only a log over
// its budget cuts a watcher off before it is live; the watcher sends the
// rest of its snapshot and SNAPSHOT_DONE, and ends with ErrWatchLagged.
// Once live, a watcher's buffer holds watchBuffer events at most; the
// events are shared by every watcher, so what the buffers hold is at most
// the last watchBuffer events published, however many watchers lag.

// snapshotAhead is how many chunks the reader may have read that the Watch
// has not taken yet.
const snapshotAhead = 1

// errSnapshotStopped ends a snapshot reader whose Watch no longer sends.
var errSnapshotStopped = errors.New("the watch stopped sending its snapshot")

// snapshotReader reads one Watch's snapshot (see the comment above).
type snapshotReader struct {
	e    *Engine
	w    *watcher
	ctx  context.Context
	stop <-chan struct{} // closed when the Watch no longer sends
	// out carries the SNAPSHOT events; it is closed when the snapshot is
	// read whole or the reader failed, and err, now and writes are set
	// before.
	out chan *durablev1.WatchEvent
	err error
	// now is the server time of the view, writes the gate's state at it:
	// what SNAPSHOT_DONE carries.
	now    *timestamppb.Timestamp
	writes *durablev1.WritesState
	// Set at the view, only for the reader: the override table the
	// activities are shown under and the operations running.
	overrides overrideTable
	running   map[int64]bool
	defaults  PolicyDefaults
	held      bool // the reader holds a snapshot-reader token
}

// startSnapshot starts the reader of w's snapshot, which registers w at the
// point its view is fixed; stop ends it early.
func (e *Engine) startSnapshot(ctx context.Context, w *watcher, stop <-chan struct{}) *snapshotReader {
	r := &snapshotReader{e: e, w: w, ctx: ctx, stop: stop, out: make(chan *durablev1.WatchEvent, snapshotAhead)}
	go func() {
		defer close(r.out)
		r.err = r.read()
		r.release()
	}()
	return r
}

// acquire takes a snapshot-reader token, waiting for one.
func (r *snapshotReader) acquire() error {
	select {
	case r.e.snapshotReads <- struct{}{}:
		r.held = true
		return nil
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-r.stop:
		return errSnapshotStopped
	case <-r.e.closeCh:
		return ErrClosed
	}
}

// release gives back the token, if the reader holds it.
func (r *snapshotReader) release() {
	if r.held {
		r.held = false
		<-r.e.snapshotReads
	}
}

// snapshotYield is how long a reader waits for its client with its token
// before it lets the token go: a client that keeps up, but whose sender
// was not scheduled at once on a busy machine, keeps it; one slower than
// that lets another watcher read meanwhile. Were the token let go at every
// wait, each reader would hand it on at every chunk and the snapshots
// opened together would all be read at once, taking the CPU the commits
// need (BenchmarkWatchOpens' commit-p99-ms in internal/bench).
const snapshotYield = 100 * time.Millisecond

// emit hands a chunk to the Watch. While the client keeps up, the reader
// keeps its token and reads on; when it has to wait for the client longer
// than snapshotYield, it waits without the token and takes one again to
// read on.
func (r *snapshotReader) emit(ev *durablev1.WatchEvent) error {
	select {
	case r.out <- ev:
		return nil
	default:
	}
	// Real time, not the engine's clock: this is about the CPU.
	yield := time.NewTimer(snapshotYield)
	defer yield.Stop()
	select {
	case r.out <- ev:
		return nil
	case <-yield.C:
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-r.stop:
		return errSnapshotStopped
	case <-r.e.closeCh:
		return ErrClosed
	}
	r.release()
	select {
	case r.out <- ev:
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-r.stop:
		return errSnapshotStopped
	case <-r.e.closeCh:
		return ErrClosed
	}
	return r.acquire()
}

// read fixes the view, registers the watcher and streams the snapshot.
// Snapshots begin a few at a time, with a token, so that a crowd of
// watchers opening at once takes turns rather than the CPU the batcher
// needs.
func (r *snapshotReader) read() error {
	e := r.e
	if e.longViews != nil {
		select {
		case e.longViews <- struct{}{}:
			defer func() { <-e.longViews }()
		case <-r.ctx.Done():
			return r.ctx.Err()
		case <-r.stop:
			return errSnapshotStopped
		case <-e.closeCh:
			return ErrClosed
		}
	}
	if err := r.acquire(); err != nil {
		return err
	}
	// Close waits for the views before the store may close.
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.snapshotViews.Add(1)
	e.mu.Unlock()
	defer e.snapshotViews.Done()
	e.publishing.Lock()
	locked := true
	defer func() {
		if locked {
			e.publishing.Unlock()
		}
	}()
	return e.store.View(func(tx Tx) error {
		// The view is fixed: the store's View sees what committed before
		// it was called, and no batch commits while publishing is held.
		e.mu.Lock()
		err := e.registerLocked(r.w)
		if err == nil {
			r.now = ts(e.now())
			r.writes = e.writesStateLocked(e.gate.err())
			r.overrides = e.overrideTable()
			r.running = make(map[int64]bool, len(e.ops))
			for seq := range e.ops {
				r.running[seq] = true
			}
		}
		e.mu.Unlock()
		e.publishing.Unlock()
		locked = false
		if err != nil {
			return err
		}
		r.defaults = e.policyDefaults()
		return r.stream(tx, r.now.AsTime().Add(-watchClosedWindow))
	})
}

// stream reads the snapshot from tx and hands it over in chunks: first the
// operations and overrides (few and small: one event carries them all),
// then the pending activities, the running workflows and those closed since
// since (newest first, at most watchClosedMax), at most snapshotChunk items
// to an event.
func (r *snapshotReader) stream(tx Tx, since time.Time) error {
	ops, err := watchedOperations(tx, r.running, since)
	if err != nil {
		return err
	}
	if len(ops) > 0 || len(r.overrides) > 0 {
		ev := r.event()
		ev.Operations = ops
		for _, o := range r.overrides.sorted() {
			ev.PolicyOverrides = append(ev.PolicyOverrides, proto.CloneOf(o))
		}
		if err := r.emit(ev); err != nil {
			return err
		}
	}
	c := chunker{r: r, ev: r.event()}
	err = tx.ScanActivities(func(a *durablev1.ActivityRecord) bool {
		in := a.GetInfo()
		InForce(in, r.overrides.lookup(in.GetActivityType(), in.GetTaskQueue()), r.defaults)
		c.ev.Activities = append(c.ev.Activities, in)
		return c.added()
	})
	if err = c.result(err); err != nil {
		return err
	}
	err = tx.RunningWorkflows(func(w *durablev1.WorkflowRecord) bool {
		showWorkflowTask(w)
		c.ev.Workflows = append(c.ev.Workflows, w.GetInfo())
		return c.added()
	})
	if err = c.result(err); err != nil {
		return err
	}
	closed := 0
	err = tx.ClosedWorkflows(since, func(w *durablev1.WorkflowRecord) bool {
		c.ev.Workflows = append(c.ev.Workflows, w.GetInfo())
		closed++
		return c.added() && closed < watchClosedMax
	})
	if err = c.result(err); err != nil {
		return err
	}
	if len(c.ev.Activities)+len(c.ev.Workflows) > 0 {
		return r.emit(c.ev)
	}
	return nil
}

// event is an empty SNAPSHOT event of the view.
func (r *snapshotReader) event() *durablev1.WatchEvent {
	return &durablev1.WatchEvent{Kind: durablev1.WatchEventKind_WATCH_EVENT_KIND_SNAPSHOT, ServerTime: r.now}
}

// chunker fills SNAPSHOT events to snapshotChunk items and hands each full
// one over from inside a store scan.
type chunker struct {
	r   *snapshotReader
	ev  *durablev1.WatchEvent
	err error // why the scan was stopped
}

// added hands the event over once an item made it full, and says whether
// the scan goes on.
func (c *chunker) added() bool {
	if len(c.ev.Activities)+len(c.ev.Workflows) < snapshotChunk {
		return true
	}
	ev := c.ev
	c.ev = c.r.event()
	c.err = c.r.emit(ev)
	return c.err == nil
}

// result is the error of a scan that added: the store's, or why the
// chunker stopped it.
func (c *chunker) result(err error) error {
	if err != nil {
		return err
	}
	return c.err
}
