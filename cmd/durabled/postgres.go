package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// openPostgres opens the store as the node cfg.node. Any number of nodes
// may serve one database; a name a live node holds is refused by the store
// (*pgstore.NodeNameError, which says why and what to do).
//
// A node restarted right after it crashed finds its own name still held:
// the row of the process that died counts as alive until AliveWithin after
// its last heartbeat. So that a supervisor restarting it at once does not
// see it fail for that, a refused node waits until the holder's heartbeat
// would have to be stale and tries again meanwhile; a name that a running
// node holds stays held, and the node exits with the store's refusal once
// the wait is over. ctx ending (SIGTERM) ends the wait.
func openPostgres(ctx context.Context, cfg config, logger *slog.Logger) (*pgstore.Store, error) {
	var until time.Time
	for {
		st, err := pgstore.Open(cfg.postgresDSN, pgstore.Options{Node: cfg.node})
		var held *pgstore.NodeNameError
		if errors.As(err, &held) {
			if until.IsZero() {
				wait := max(pgstore.AliveWithin-held.Ago, 0) + nameRetryEvery
				until = time.Now().Add(wait)
				logger.Warn("node name in use; waiting in case its holder has died", "node", cfg.node,
					"last_seen_ago", held.Ago.Round(time.Millisecond), "wait", wait.Round(time.Millisecond))
			}
			if time.Now().Before(until) {
				select {
				case <-time.After(nameRetryEvery):
					continue
				case <-ctx.Done():
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("postgres %s: %w", pgDatabase(cfg.postgresDSN), err)
		}
		return st, nil
	}
}

// nameRetryEvery is how often a node waiting for its name tries again.
const nameRetryEvery = 500 * time.Millisecond

// pgDatabase names the database a DSN points at for logs, without its
// password: host, port and database name.
func pgDatabase(dsn string) string {
	c, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return fmt.Sprintf("%s:%d/%s", c.Host, c.Port, c.Database)
}
