package badger

import (
	"fmt"
	"sync"

	"github.com/tinyllm/durable/engine"
)

// groupSync shares fsyncs among concurrent callers (group commit). One
// goroutine runs the fsyncs. A caller joins the waiting batch; when the
// goroutine is free it takes the whole batch, then starts an fsync, then
// answers everyone in the batch. A caller that arrives while an fsync is in
// flight therefore waits for the next one: every caller returns only after an
// fsync that started after its call began, and many callers pay for one.
type groupSync struct {
	syncFunc func() error

	mu      sync.Mutex
	waiting []chan error
	closed  bool
	// kick wakes the loop; it holds at most one pending wake-up. Sends and
	// its close happen under mu so that no send can follow the close.
	kick chan struct{}
	done chan struct{}
	// syncs counts fsyncs run, for tests.
	syncs int
}

func newGroupSync(syncFunc func() error) *groupSync {
	g := &groupSync{
		syncFunc: syncFunc,
		kick:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	go g.loop()
	return g
}

// Sync waits for an fsync that starts after the call and returns its error.
func (g *groupSync) Sync() error {
	ch := make(chan error, 1)
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return fmt.Errorf("badger store sync: %w", engine.ErrClosed)
	}
	g.waiting = append(g.waiting, ch)
	select {
	case g.kick <- struct{}{}:
	default: // a wake-up is already pending; it will take this caller too
	}
	g.mu.Unlock()
	return <-ch
}

func (g *groupSync) loop() {
	defer close(g.done)
	for range g.kick {
		g.mu.Lock()
		batch := g.waiting
		g.waiting = nil
		if len(batch) > 0 {
			g.syncs++
		}
		g.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		err := g.syncFunc()
		if err != nil {
			err = fmt.Errorf("badger store sync: %w", err)
		}
		for _, ch := range batch {
			ch <- err
		}
	}
}

// close refuses new callers, lets the loop answer every caller already
// waiting, and returns once the loop has stopped.
func (g *groupSync) close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		close(g.kick)
	}
	g.mu.Unlock()
	<-g.done
}

// pending reports how many callers wait for the next fsync, for tests.
func (g *groupSync) pending() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

// runs reports how many fsyncs have been started, for tests.
func (g *groupSync) runs() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.syncs
}
