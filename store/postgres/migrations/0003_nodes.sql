-- Several nodes on one database. Every node registers under a name and
-- says every second that it is alive. What each transaction of every node
-- would otherwise write to one row is kept per node instead, and summed or
-- merged when read, so that the nodes do not queue behind one another's row
-- locks or abort one another's transactions on it: the activity counts and
-- the hourly latency records. Ids come from a sequence, which hands out
-- numbers outside any transaction.
--
-- Rows written before this version belong to the node named '' (no node
-- can have that name).

CREATE TABLE nodes (
	name        text COLLATE "C" PRIMARY KEY,
	-- started is when the node opened the database under this name;
	-- last_seen when it last said it was alive (the database's clock).
	started     timestamptz NOT NULL,
	last_seen   timestamptz NOT NULL,
	-- incarnation tells one opening of a name from a later one.
	incarnation bigint NOT NULL
);

-- A node's counts move by what its transactions moved, and so do the
-- counts of each slot of a node: the transactions a node runs at once hold
-- different slots, so that they do not write the same row either. A count
-- may be negative in one row (an activity scheduled through one node and
-- completed through another) and only the sum of the rows means anything.
-- A row that falls to zero is deleted.
ALTER TABLE activity_counts ADD COLUMN node text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE activity_counts ALTER COLUMN node DROP DEFAULT;
ALTER TABLE activity_counts ADD COLUMN slot smallint NOT NULL DEFAULT 0;
ALTER TABLE activity_counts DROP CONSTRAINT activity_counts_pkey;
ALTER TABLE activity_counts ADD PRIMARY KEY (node, slot, state, task_queue);

-- A node's part of an hour holds the attempts counted through it; the hour
-- is the parts merged. Room is left on each page so that rewriting a part
-- stays on its page (a HOT update, no new index entry).
ALTER TABLE latency_hours ADD COLUMN node text COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE latency_hours ALTER COLUMN node DROP DEFAULT;
DROP INDEX latency_hours_order;
CREATE UNIQUE INDEX latency_hours_order ON latency_hours (length(activity_type), activity_type, hour, node);
ALTER TABLE latency_hours SET (fillfactor = 50);

-- The ids of every node: queue sequence numbers, lease, audit and
-- operation ids. It starts after the counter the single-node engine kept.
CREATE SEQUENCE ids AS bigint;
SELECT setval('ids', n) FROM counter WHERE n > 0;

-- reserve_ids returns the first of n consecutive ids no other call returns.
-- nextval hands out one number at a time, so the block is taken by moving
-- the sequence on by n under an advisory lock held for those two calls
-- only (never to the end of the caller's transaction). It never returns an
-- id at or below the counter, should a single-node engine have moved it on
-- since.
CREATE FUNCTION reserve_ids(n bigint) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	first bigint;
BEGIN
	IF n < 1 THEN
		RAISE EXCEPTION 'reserve_ids: n must be at least 1, got %', n;
	END IF;
	PERFORM pg_advisory_lock(7238817738656408691); -- "durabids"
	BEGIN
		first := greatest(nextval('ids'), coalesce((SELECT c.n FROM counter c), 0) + 1);
		PERFORM setval('ids', first + n - 1);
	EXCEPTION WHEN OTHERS OR query_canceled THEN
		PERFORM pg_advisory_unlock(7238817738656408691);
		RAISE;
	END;
	PERFORM pg_advisory_unlock(7238817738656408691);
	RETURN first;
END
$$;
