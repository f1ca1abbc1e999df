-- What every node serving the database shares: the key that seals task
-- tokens, so a token one node handed out opens on any node and after a
-- restart. One row, created by the first node that starts.
CREATE TABLE token_key (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	key bytea NOT NULL
);
