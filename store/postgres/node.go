package postgres

import (
	"context"
	"fmt"
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
