package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// The write gate. Whoever watches the disk (a monitor of free space on the
// data volume) closes it with RefuseWrites and opens it with AllowWrites; a
// failed sync, or a store opened read-only (Options.ReadOnly), closes it for
// good, that is until the daemon restarts. While it is closed:
//
//   - every call that changes state fails with the refusal, before anything
//     reaches the store (the batcher checks the gate once per batch);
//   - polls hand out no work: a lease is a write. They stay parked as usual
//     and are woken when the gate opens, so workers neither spin nor see
//     errors;
//   - timers do not fire and the janitors and the releaser of redrive
//     operations wait, instead of failing in a loop; reads therefore show
//     the state as of the refusal (a lease past its deadline still shows as
//     started until the gate opens and its timer fires);
//   - reads, Watch and describe go on.

var (
	// ErrWritesRefused: the engine refuses changes of state for now (the
	// disk is short of space, the store is read-only, or a sync failed);
	// reads, Watch and polls go on. Every refusal matches it with errors.Is.
	ErrWritesRefused = errors.New("writes refused")
	// ErrNoSpace: the store's volume is short of free space. A refusal for
	// want of space wraps it, and so does a store's own out-of-space error;
	// the server answers ResourceExhausted.
	ErrNoSpace = errors.New("not enough disk space")
)

// refusal is the error of every call the gate refuses: its message is the
// reason's, which says what to do.
type refusal struct{ reason error }

func (r *refusal) Error() string        { return r.reason.Error() }
func (r *refusal) Unwrap() error        { return r.reason }
func (r *refusal) Is(target error) bool { return target == ErrWritesRefused }

// refused reports whether err is a refusal of the gate or a store's want of
// space: what internal writers wait out rather than log.
func refused(err error) bool {
	return errors.Is(err, ErrWritesRefused) || errors.Is(err, ErrNoSpace)
}

// writeGate is the engine's state of writes. Writers read it once per batch
// and internal writers wait on it; it is changed from outside (RefuseWrites,
// AllowWrites) and by the batcher (a failed sync).
type writeGate struct {
	// notify is held across a change and its report to
	// Options.WritesChangedFunc, so reports arrive in the order of the
	// changes.
	notify sync.Mutex

	mu      sync.Mutex
	refused error // from RefuseWrites; nil when allowed
	halted  error // sticky: a read-only store, a failed sync
	// open is closed while writes are allowed; while they are refused it
	// is a fresh channel that AllowWrites (or nothing, when halted) closes.
	open chan struct{}
}

func newWriteGate(halted error) *writeGate {
	g := &writeGate{open: make(chan struct{})}
	if halted != nil {
		g.halted = &refusal{halted}
	} else {
		close(g.open)
	}
	return g
}

// err is the error writes are refused with now, nil while they are allowed.
func (g *writeGate) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.errLocked()
}

func (g *writeGate) errLocked() error {
	if g.halted != nil {
		return g.halted
	}
	return g.refused
}

// wait returns a channel that is closed once writes are allowed (already
// closed if they are now).
func (g *writeGate) wait() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// set changes the gate with fn and reports whether that changed the error
// writes are refused with, and the new one.
func (g *writeGate) set(fn func()) (changed bool, now error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	before := g.errLocked()
	fn()
	now = g.errLocked()
	switch {
	case before == nil && now != nil:
		g.open = make(chan struct{})
	case before != nil && now == nil:
		close(g.open)
	}
	return before != now, now
}

// RefuseWrites closes the write gate: every change of state is refused with
// reason (wrap ErrNoSpace in it for want of space; its message should say
// what to do) until AllowWrites. Calling it again replaces the reason, with
// fresh figures, say. It must not be called from Options.WritesChangedFunc.
func (e *Engine) RefuseWrites(reason error) {
	e.changeGate(func() { e.gate.refused = &refusal{reason} })
}

// AllowWrites opens the write gate that RefuseWrites closed: parked polls
// look at their queues again and paused writers go on at once. A gate
// closed for good (a read-only store, a failed sync) stays closed.
func (e *Engine) AllowWrites() {
	changed, now := e.changeGate(func() { e.gate.refused = nil })
	if changed && now == nil {
		e.wakeAll()
	}
}

// WritesRefused returns the error changes of state are refused with now, or
// nil while they are allowed.
func (e *Engine) WritesRefused() error { return e.gate.err() }

// haltWrites closes the gate until the daemon restarts, with reason; it
// reports whether the gate was not halted before.
func (e *Engine) haltWrites(reason error) (first bool) {
	e.changeGate(func() {
		if e.gate.halted == nil {
			e.gate.halted = &refusal{reason}
			first = true
		}
	})
	return first
}

func (e *Engine) changeGate(fn func()) (bool, error) {
	e.gate.notify.Lock()
	defer e.gate.notify.Unlock()
	changed, now := e.gate.set(fn)
	if changed && e.opts.WritesChangedFunc != nil {
		e.opts.WritesChangedFunc(now)
	}
	if changed {
		e.showGate(now)
	}
	return changed, now
}

// gateShowEvery is how often watchers hear a refusal renewed with fresh
// figures (the disk monitor renews it at every reading, up to ten times a
// second); a change between refused and allowed is sent at once.
const gateShowEvery = 10 * time.Second

// showGate sends watchers the gate's state after a change to err.
func (e *Engine) showGate(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	switch {
	case (err != nil) != e.gateRefused:
		e.gateRefused, e.writesSince = err != nil, now
	case now.Sub(e.gateShownAt) < gateShowEvery:
		return
	}
	e.gateShownAt = now
	e.sendLocked([]*durablev1.WatchEvent{{
		Kind:       durablev1.WatchEventKind_WATCH_EVENT_KIND_UPSERT,
		ServerTime: ts(now),
		Writes:     e.writesStateLocked(err),
	}})
}

// writesStateLocked is what Watch shows of the gate, refused with err (nil
// while writes are allowed).
func (e *Engine) writesStateLocked(err error) *durablev1.WritesState {
	st := &durablev1.WritesState{Refused: err != nil, Since: ts(e.writesSince)}
	if err != nil {
		st.Reason = err.Error()
	}
	return st
}

// waitWritable blocks while writes are refused; it returns false if the
// engine closes meanwhile. Internal writers call it before they write, so
// that a full disk pauses them instead of failing them in a loop.
func (e *Engine) waitWritable() bool {
	select {
	case <-e.gate.wait():
		return true
	case <-e.closeCh:
		return false
	}
}

// storeRetryAfter is how long an internal writer waits after a store error
// that left the gate open (the store said it had no space while the volume
// reads as having room, because a quota or its inodes ran out, say):
// nothing else would stop it retrying at once, in a loop.
const storeRetryAfter = time.Second

// pauseAfter is what an internal writer (the timer loop, the releaser)
// does after a round that ended with err, before its next one; it returns
// false when the engine closed. An error while the gate is open is waited
// out for storeRetryAfter on the engine's clock; a closed gate is waited
// out by waitWritable at the top of the writer's loop.
func (e *Engine) pauseAfter(err error) bool {
	switch {
	case errors.Is(err, ErrClosed):
		return false
	case err == nil || e.gate.err() != nil:
		return true
	}
	select {
	case <-e.clock.After(storeRetryAfter):
		return true
	case <-e.closeCh:
		return false
	}
}

// wakeAll wakes every parked poll and the timer loop: writes were refused
// and are allowed again, so work that waited can be handed out.
func (e *Engine) wakeAll() {
	e.mu.Lock()
	for k := range e.waiters {
		e.wakeLocked(k, -1)
	}
	e.mu.Unlock()
	select {
	case e.timerWake <- struct{}{}:
	default:
	}
}

// storeFailed is told that a store commit failed with err. The disk watcher
// hears of it first (Options.WriteFailedFunc) and may refuse writes now;
// then the caller gets the refusal, which says what to do, with the store's
// error after it; else the store's error.
func (e *Engine) storeFailed(err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	if f := e.opts.WriteFailedFunc; f != nil {
		f(err)
	}
	if r := e.gate.err(); r != nil {
		return fmt.Errorf("%w (the store's write failed: %v)", r, err)
	}
	return err
}

// syncFailed is told that a sync failed with err. The changes committed
// since the last good sync may then not be on disk (a file system may drop
// the pages of a failed sync and report success on the next one), so no
// later change may build on them: the gate closes until a restart recovers
// the store from its log. Every caller waiting for the sync gets the
// refusal; none was acknowledged.
func (e *Engine) syncFailed(err error) error {
	if errors.Is(err, ErrClosed) {
		return err
	}
	if f := e.opts.WriteFailedFunc; f != nil {
		f(err)
	}
	var reason error
	if r := e.gate.err(); errors.Is(err, ErrNoSpace) || errors.Is(r, ErrNoSpace) {
		reason = fmt.Errorf("%w: a sync of the store failed for want of space (%v); changes since the last good sync may not be on disk, so writes are refused until the daemon restarts and recovers from its log: free space, then restart it", ErrNoSpace, err)
	} else {
		reason = fmt.Errorf("a sync of the store failed (%w); changes since the last good sync may not be on disk, so writes are refused until the daemon restarts and recovers from its log: check the disk, then restart it", err)
	}
	if e.haltWrites(reason) {
		e.opts.Logger.Error("a sync of the store failed; refusing writes until the daemon restarts", "err", err)
	}
	return e.gate.err()
}
