package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	pgstore "github.com/tinyllm/durable/store/postgres"
)

// The stores --store names.
const (
	storeBadger   = "badger"
	storePostgres = "postgres"
)

// postgresDSNEnv is where the DSN may come from instead of --postgres-dsn,
// so that a password in it stays out of ps.
const postgresDSNEnv = "DURABLE_POSTGRES_DSN"

// nodeLockCheck is how often the node checks that the connection holding
// its node lock is still alive.
const nodeLockCheck = 5 * time.Second

// errAnotherNode is what a second node on the same database is told.
var errAnotherNode = errors.New("another durabled is serving this database; " +
	"running several nodes needs queues, timers and polls shared through the database, which this version does not have yet: " +
	"stop the other node, or point this one at another database")

// openPostgres takes the database's node lock and opens the store. The lock
// is taken first: a second node is refused before it touches the schema.
func openPostgres(ctx context.Context, cfg config) (*pgstore.Store, *pgstore.NodeLock, error) {
	lockCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lock, err := pgstore.LockNode(lockCtx, cfg.postgresDSN, nodeLockCheck)
	if errors.Is(err, pgstore.ErrNodeLocked) {
		return nil, nil, errAnotherNode
	}
	if err != nil {
		return nil, nil, fmt.Errorf("postgres %s: %w", pgDatabase(cfg.postgresDSN), err)
	}
	st, err := pgstore.Open(cfg.postgresDSN, pgstore.Options{Node: cfg.node})
	if err != nil {
		lock.Release()
		return nil, nil, fmt.Errorf("postgres %s: %w", pgDatabase(cfg.postgresDSN), err)
	}
	return st, lock, nil
}

// pgDatabase names the database a DSN points at for logs, without its
// password: host, port and database name.
func pgDatabase(dsn string) string {
	c, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}
