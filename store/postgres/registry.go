package postgres

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
)

// AliveWithin is how recently a node must have said it was alive to count
// as alive: Open refuses the name of such a node, and anything that shows
// the nodes of a database (durabled's metrics, wf) should use the same rule.
// It is measured on the database's clock, which is the one every node's
// last_seen is written with; a node says it is alive every heartbeatEvery.
const AliveWithin = 5 * time.Second

const (
	// heartbeatEvery is how often a node says it is alive.
	heartbeatEvery = time.Second
	// forgetAfter is how long a node not seen is still listed by Nodes;
	// Open forgets nodes older than that.
	forgetAfter = 24 * time.Hour
	// maxNodeName bounds a node's name (it travels in every notice).
	maxNodeName = 200
)

// NodeNameError is Open's refusal of a name another node is alive under.
type NodeNameError struct {
	Name string
	// LastSeen is when the node holding the name last said it was alive,
	// Ago how long before the refusal (both on the database's clock).
	LastSeen time.Time
	Ago      time.Duration
}

func (e *NodeNameError) Error() string {
	return fmt.Sprintf("node name %q is in use: the node holding it was last seen %s ago (at %s), and a node seen within %s counts as alive; "+
		"give this node another name, or start it once that node has stopped",
		e.Name, e.Ago.Round(time.Millisecond), e.LastSeen.UTC().Format(time.RFC3339Nano), AliveWithin)
}

// checkNodeName refuses a name that could not travel in a notice or be
// shown in a list of nodes.
func checkNodeName(name string) error {
	reason := ""
	switch {
	case name == "":
		reason = "is required"
	case len(name) > maxNodeName:
		reason = fmt.Sprintf("must be at most %d bytes, got %d", maxNodeName, len(name))
	case !utf8.ValidString(name):
		reason = "must be valid UTF-8"
	default:
		for _, r := range name {
			if unicode.IsControl(r) {
				reason = fmt.Sprintf("must not contain control characters (%U)", r)
				break
			}
		}
	}
	if reason != "" {
		return &engine.InvalidError{Field: "node", Reason: reason}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func randomInt63() int64 {
	var b [8]byte
	rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]) >> 1)
}

// micros is d in microseconds, for SQL that multiplies it by
// interval '1 microsecond'.
func micros(d time.Duration) int64 { return d.Microseconds() }

// Node returns the node's name.
func (s *Store) Node() string { return s.node }

// register takes the node's name in the registry, unless a node alive
// within AliveWithin holds it, forgets nodes gone longer than forgetAfter,
// and folds the activity counts of the nodes that are not alive into this
// node's, so that a database many short-lived nodes served keeps a few
// rows per queue and state.
func (s *Store) register(ctx context.Context) error {
	var taken bool
	err := s.pool.QueryRow(ctx, `INSERT INTO nodes (name, started, last_seen, incarnation) VALUES ($1, now(), now(), $2)
		ON CONFLICT (name) DO UPDATE SET started = now(), last_seen = now(), incarnation = excluded.incarnation
			WHERE nodes.last_seen <= now() - $3 * interval '1 microsecond'
		RETURNING true`, s.node, s.incarnation, micros(AliveWithin)).Scan(&taken)
	if errors.Is(err, pgx.ErrNoRows) {
		e := &NodeNameError{Name: s.node}
		var ago float64
		err = s.pool.QueryRow(ctx, "SELECT last_seen, extract(epoch FROM now() - last_seen)::float8 FROM nodes WHERE name = $1", s.node).
			Scan(&e.LastSeen, &ago)
		if err != nil {
			return fmt.Errorf("node name %q is in use; reading when it was last seen: %w", s.node, err)
		}
		e.Ago = time.Duration(ago * float64(time.Second))
		return e
	}
	if err != nil {
		return fmt.Errorf("register node %q: %w", s.node, err)
	}
	err = s.serializable(ctx, func(ptx pgx.Tx) error {
		batch := &pgx.Batch{}
		batch.Queue("DELETE FROM nodes WHERE last_seen < now() - $1 * interval '1 microsecond' AND name <> $2", micros(forgetAfter), s.node)
		batch.Queue(`WITH gone AS (
				DELETE FROM activity_counts c WHERE c.node <> $1 AND NOT EXISTS (SELECT 1 FROM nodes
					WHERE nodes.name = c.node AND nodes.last_seen > now() - $2 * interval '1 microsecond')
				RETURNING state, task_queue, n),
			sums AS (SELECT state, task_queue, sum(n)::bigint AS n FROM gone GROUP BY state, task_queue)
			INSERT INTO activity_counts (node, slot, state, task_queue, n) SELECT $1, 0, state, task_queue, n FROM sums WHERE n <> 0
			ON CONFLICT (node, slot, state, task_queue) DO UPDATE SET n = activity_counts.n + excluded.n`, s.node, micros(AliveWithin))
		batch.Queue("DELETE FROM activity_counts WHERE node = $1 AND n = 0", s.node)
		return ptx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return fmt.Errorf("register node %q: fold the counts of nodes gone: %w", s.node, err)
	}
	return nil
}

// serializable runs fn in a serializable transaction of the pool, again on
// a conflict, as Update does.
func (s *Store) serializable(ctx context.Context, fn func(pgx.Tx) error) error {
	var err error
	for range maxAttempts {
		err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, fn)
		if !retryable(err) {
			return err
		}
	}
	return err
}

// release tells the other nodes that the name is free: its last_seen goes
// back to the edge of AliveWithin, so that a node started under the same
// name right away is not refused.
func (s *Store) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.pool.Exec(ctx, "UPDATE nodes SET last_seen = least(last_seen, now() - $3 * interval '1 microsecond') WHERE name = $1 AND incarnation = $2",
		s.node, s.incarnation, micros(AliveWithin))
}

// Nodes returns the nodes the registry holds, by name; Open forgets the
// nodes not seen for forgetAfter (a day). A node that closed has its
// last_seen moved back by AliveWithin (see release).
func (s *Store) Nodes() ([]engine.NodeInfo, error) {
	if s.closed.Load() {
		return nil, engine.ErrClosed
	}
	ctx := context.Background()
	rows, err := s.pool.Query(ctx, "SELECT name, started, last_seen FROM nodes ORDER BY name")
	if err != nil {
		return nil, s.mapErr(fmt.Errorf("nodes: %w", err))
	}
	ns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.NodeInfo, error) {
		var n engine.NodeInfo
		err := r.Scan(&n.Name, &n.Started, &n.LastSeen)
		n.Started, n.LastSeen = n.Started.UTC(), n.LastSeen.UTC()
		return n, err
	})
	if err != nil {
		return nil, s.mapErr(fmt.Errorf("nodes: %w", err))
	}
	return ns, nil
}

// heartbeat says every heartbeatEvery that the node is alive, on a
// connection of its own, so that a pool whose connections are all busy
// with long transactions does not make the node look dead.
type heartbeat struct {
	stopCh chan struct{}
	done   chan struct{}
}

func startHeartbeat(s *Store) *heartbeat {
	h := &heartbeat{stopCh: make(chan struct{}), done: make(chan struct{})}
	go h.run(s)
	return h
}

func (h *heartbeat) run(s *Store) {
	defer close(h.done)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(heartbeatEvery)
	defer tick.Stop()
	for {
		select {
		case <-h.stopCh:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), heartbeatEvery)
		if conn == nil {
			c, err := pgx.ConnectConfig(ctx, s.conn.Copy())
			if err != nil {
				cancel()
				continue // the next tick tries again
			}
			conn = c
		}
		// A row some Open forgot is written again; a row another
		// incarnation took over is left to it.
		_, err := conn.Exec(ctx, `INSERT INTO nodes (name, started, last_seen, incarnation) VALUES ($1, now(), now(), $2)
			ON CONFLICT (name) DO UPDATE SET last_seen = now() WHERE nodes.incarnation = excluded.incarnation`, s.node, s.incarnation)
		cancel()
		if err != nil {
			conn.Close(context.Background())
			conn = nil
		}
	}
}

func (h *heartbeat) stop() {
	close(h.stopCh)
	<-h.done
}
