package postgres

// LongViews is how many read views may stay open at once for as long as
// their readers wait (a Watch's snapshot streaming to a slow client): half
// the connections, at least one. Each view holds a connection for its
// transaction, and the rest must stay free for the commits.
func (s *Store) LongViews() int {
	return max(1, int(s.pool.Config().MaxConns)/2)
}
