package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// TokenKey returns the key that seals task tokens for every node on the
// database. The first call on a database stores fresh (which must be a new
// random key); every later call, from any node, returns the stored key.
func (s *Store) TokenKey(fresh []byte) ([]byte, error) {
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, "INSERT INTO token_key (key) VALUES ($1) ON CONFLICT (one) DO NOTHING", fresh); err != nil {
		return nil, s.mapErr(fmt.Errorf("store token key: %w", err))
	}
	var key []byte
	if err := s.pool.QueryRow(ctx, "SELECT key FROM token_key").Scan(&key); err != nil {
		return nil, s.mapErr(fmt.Errorf("read token key: %w", err))
	}
	return key, nil
}

// nodeLock is the session-level advisory lock one serving node holds on its
// database ("durablen"): advisory locks are per database, so nodes on other
// databases of the same server do not contend.
const nodeLock = 0x64757261626c656e

// ErrNodeLocked is returned by LockNode when another session holds the node
// lock of the database.
var ErrNodeLocked = errors.New("another node holds this database's node lock")

// NodeLock is the node lock held by a connection of its own.
type NodeLock struct {
	conn *pgx.Conn
	lost chan struct{}
	stop chan struct{}
	done chan struct{}
}

// LockNode takes the database's node lock on a connection of its own, kept
// open (and the lock held) until Release. It returns ErrNodeLocked at once
// if another session holds it. The connection is checked every interval;
// if it breaks, the lock is gone with it and Lost is closed.
func LockNode(ctx context.Context, dsn string, interval time.Duration) (*NodeLock, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect for the node lock: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", int64(nodeLock)).Scan(&ok); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("take the node lock: %w", err)
	}
	if !ok {
		conn.Close(context.Background())
		return nil, ErrNodeLocked
	}
	l := &NodeLock{conn: conn, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go l.watch(interval)
	return l, nil
}

// watch pings the lock's connection until Release or until it fails.
func (l *NodeLock) watch(interval time.Duration) {
	defer close(l.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), interval)
			err := l.conn.Ping(ctx)
			cancel()
			if err != nil {
				close(l.lost)
				return
			}
		}
	}
}

// Lost is closed when the lock's connection broke: the lock is no longer
// held, and another node may take it.
func (l *NodeLock) Lost() <-chan struct{} { return l.lost }

// Release gives the lock back by closing its connection.
func (l *NodeLock) Release() {
	close(l.stop)
	<-l.done
	l.conn.Close(context.Background())
}
