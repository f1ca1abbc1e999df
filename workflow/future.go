package workflow

import (
	"fmt"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// Future is the result of an operation that completes later: an activity or
// a timer.
type Future interface {
	// Get blocks until the future is ready and decodes its value into
	// valuePtr (a pointer, or nil to discard it). It returns the operation's
	// error: for an activity, an *ActivityError, which errors.As also turns
	// into the *activity.Error with the failure type.
	Get(ctx Context, valuePtr any) error
	// IsReady reports whether Get would return without blocking.
	IsReady() bool
}

type future struct {
	env   *env
	ready bool
	value []byte
	err   error
}

func (f *future) IsReady() bool { return f.ready }

func (f *future) Get(ctx Context, valuePtr any) error {
	ctx.state().co.yieldUntil(f.IsReady)
	if f.err != nil {
		return f.err
	}
	if err := f.env.conv.FromPayload(f.value, valuePtr); err != nil {
		return fmt.Errorf("workflow: decode result: %w", err)
	}
	return nil
}

func (f *future) resolve(value []byte, err error) {
	if f.ready {
		return
	}
	f.ready, f.value, f.err = true, value, err
}

// NewTimer returns a future that is ready d after now, durably: the timer
// lives in the daemon and survives workers and restarts. A d of zero or less
// is ready at once.
func NewTimer(ctx Context, d time.Duration) Future {
	c := ctx.state()
	e := c.env
	f := &future{env: e}
	if d <= 0 {
		f.resolve(nil, nil)
		return f
	}
	id := e.nextID()
	e.command(&durablev1.Command{
		Type:          durablev1.CommandType_COMMAND_TYPE_START_TIMER,
		TimerId:       id,
		TimerDuration: protoDuration(d),
	})
	e.timers[id] = f
	e.applyEarly(id, f)
	return f
}

// Sleep blocks the coroutine for d on a durable timer.
func Sleep(ctx Context, d time.Duration) {
	_ = NewTimer(ctx, d).Get(ctx, nil)
}

// Selector waits for the first of several futures. Add futures with
// AddFuture, then call Select once per future you want handled.
type Selector struct {
	cases []selectCase
}

type selectCase struct {
	f    Future
	fn   func(Future)
	used bool
}

// NewSelector returns an empty Selector.
func NewSelector(ctx Context) *Selector { return &Selector{} }

// AddFuture registers fn to be called by Select when f is ready.
func (s *Selector) AddFuture(f Future, fn func(f Future)) *Selector {
	s.cases = append(s.cases, selectCase{f: f, fn: fn})
	return s
}

// Select blocks until one of the futures not yet handled is ready and calls
// its function; when several are ready it picks the one added first, which
// keeps replays deterministic. With nothing left to handle it returns at once.
func (s *Selector) Select(ctx Context) {
	var pick int
	ctx.state().co.yieldUntil(func() bool {
		pending := false
		for i := range s.cases {
			if s.cases[i].used {
				continue
			}
			pending = true
			if s.cases[i].f.IsReady() {
				pick = i
				return true
			}
		}
		pick = -1
		return !pending
	})
	if pick < 0 {
		return
	}
	s.cases[pick].used = true
	s.cases[pick].fn(s.cases[pick].f)
}
