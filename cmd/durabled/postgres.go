package main

import (
	"fmt"

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
func openPostgres(cfg config) (*pgstore.Store, error) {
	st, err := pgstore.Open(cfg.postgresDSN, pgstore.Options{Node: cfg.node})
	if err != nil {
		return nil, fmt.Errorf("postgres %s: %w", pgDatabase(cfg.postgresDSN), err)
	}
	return st, nil
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
