package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
)

// How long Listen waits before connecting again after its connection
// broke or a connection failed: from listenBackoffMin, doubling each
// failure, up to listenBackoffMax.
const (
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenConnectTimeout bounds one attempt to connect and LISTEN.
	listenConnectTimeout = 5 * time.Second
)

// listener is one Listen: a connection of its own (a pooled connection
// would be handed to transactions, and a LISTEN belongs to its session)
// and the goroutine that reads it.
type listener struct {
	s      *Store
	fn     func(engine.Notice)
	resync func()
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Listen calls fn with the notices other nodes' transactions sent, in the
// order they committed, on a goroutine of its own; the node's own notices
// are left out (they are told apart by the incarnation of the store that
// sent them, so two stores of one process hear each other). It returns once
// it listens, or once its first attempt failed: then it keeps trying, and
// calls resync once it listens. Whenever the connection breaks it connects
// again and calls resync once it listens again: what was sent in between
// is lost. A notice sent in parts is handed on whole, once its last part
// arrived. stop, which fn must not call, ends the listening and returns
// once fn has returned; Close stops every listener.
func (s *Store) Listen(fn func(engine.Notice), resync func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{s: s, fn: fn, resync: resync, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		cancel()
		close(l.done)
		return func() {}
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	conn, err := l.connect()
	if err != nil {
		conn = nil
	}
	go l.run(conn)
	return l.stop
}

func (l *listener) stop() {
	l.once.Do(func() {
		l.cancel()
		<-l.done
		l.s.mu.Lock()
		delete(l.s.listeners, l)
		l.s.mu.Unlock()
	})
}

// connect opens the listener's connection and LISTENs on it.
func (l *listener) connect() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(l.ctx, listenConnectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, l.s.conn.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+noticeChannel); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// run reads notices from conn (nil: not connected yet) until stop,
// connecting again whenever the connection breaks.
func (l *listener) run(conn *pgx.Conn) {
	defer close(l.done)
	missed := conn == nil
	backoff := listenBackoffMin
	for {
		if conn == nil {
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(backoff):
			}
			c, err := l.connect()
			if err != nil {
				backoff = min(2*backoff, listenBackoffMax)
				continue
			}
			conn, backoff = c, listenBackoffMin
		}
		if missed && l.resync != nil {
			l.resync()
		}
		missed = false
		l.receive(conn)
		conn.Close(context.Background())
		conn = nil
		if l.ctx.Err() != nil {
			return
		}
		missed = true
	}
}

// receive hands on the notices conn receives until it breaks or stop.
func (l *listener) receive(conn *pgx.Conn) {
	var (
		whole   *engine.Notice // the notice whose parts are arriving
		inc     int64
		number  uint64
		sending bool
	)
	for {
		n, err := conn.WaitForNotification(l.ctx)
		if err != nil {
			return // a notice that lost its last part is lost with the connection
		}
		if n.Channel != noticeChannel {
			continue
		}
		p, err := decodePart(n.Payload)
		if err != nil || p.incarnation == l.s.incarnation {
			continue
		}
		if sending && (p.incarnation != inc || p.number != number) {
			// The rest of the notice before never came (it cannot, as
			// parts arrive together): hand on what did.
			l.fn(*whole)
			sending = false
		}
		if !sending {
			whole, inc, number, sending = &p.notice, p.incarnation, p.number, true
		} else {
			join(whole, p.notice)
		}
		if !p.more {
			l.fn(*whole)
			sending = false
		}
	}
}
