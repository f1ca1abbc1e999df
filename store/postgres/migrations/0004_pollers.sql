-- The workers each node sees polling, so that any node lists those of
-- every node: a worker may poll only some of the nodes, and a node that
-- listed only its own would call a queue it does not serve unpolled. Each
-- node replaces its rows every few seconds; rows of a node that is not
-- alive are not read.

CREATE TABLE pollers (
	node       text COLLATE "C" NOT NULL,
	task_queue bytea NOT NULL,
	kind       smallint NOT NULL,
	identity   bytea NOT NULL,
	-- parked: a poll of it was open on the node; last_poll: when one last
	-- opened or closed there (Unix nanoseconds).
	parked     boolean NOT NULL,
	last_poll  bigint NOT NULL,
	PRIMARY KEY (node, task_queue, kind, identity)
);
