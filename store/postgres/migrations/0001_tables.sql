-- The engine's records and the indexes derived from them. Every record is
-- kept whole, protobuf-encoded, in a record column; the other columns are
-- what the store queries on, derived from the record in the same statement
-- that writes it. Ids are bytea so that they compare byte by byte, as the
-- Badger store's keys do; times are UTC Unix nanoseconds, clamped to
-- [0, 2^63-1], in bigint. Where the Badger store sorts a length-prefixed
-- string, the indexes sort by (length(x), x) to give the same order.

CREATE TABLE workflows (
	workflow_id bytea PRIMARY KEY,
	record      bytea NOT NULL,
	-- running is true while the workflow runs; closed_at is its close time
	-- once it has closed; neither for a workflow of no status.
	running     boolean NOT NULL,
	closed_at   bigint
);
CREATE INDEX workflows_running ON workflows (workflow_id) WHERE running;
CREATE INDEX workflows_closed ON workflows (closed_at, workflow_id) WHERE closed_at IS NOT NULL;

CREATE TABLE history (
	workflow_id bytea NOT NULL,
	event_id    bigint NOT NULL,
	event       bytea NOT NULL,
	PRIMARY KEY (workflow_id, event_id)
);

CREATE TABLE activities (
	workflow_id      bytea NOT NULL,
	activity_id      bytea NOT NULL,
	record           bytea NOT NULL,
	state            smallint NOT NULL,
	activity_type    bytea NOT NULL,
	task_queue       bytea NOT NULL,
	dead_lettered_at bigint,
	PRIMARY KEY (workflow_id, activity_id)
);
CREATE INDEX activities_scan ON activities (length(workflow_id), workflow_id, activity_id);
CREATE INDEX activities_state ON activities
	(state, length(activity_type), activity_type, length(workflow_id), workflow_id, activity_id)
	WHERE state <> 0;
CREATE INDEX activities_dead_letters ON activities
	(dead_lettered_at, length(workflow_id), workflow_id, activity_id)
	WHERE dead_lettered_at IS NOT NULL;

-- Every activity id a workflow has scheduled, kept after the activity ends.
CREATE TABLE activity_ids (
	workflow_id bytea NOT NULL,
	activity_id bytea NOT NULL,
	PRIMARY KEY (workflow_id, activity_id)
);

-- How many activities are in each state on each task queue; a count that
-- falls to zero is deleted.
CREATE TABLE activity_counts (
	state      smallint NOT NULL,
	task_queue bytea NOT NULL,
	n          bigint NOT NULL,
	PRIMARY KEY (state, task_queue)
);

-- Workflow timers (the records; their due times are in timers).
CREATE TABLE user_timers (
	workflow_id bytea NOT NULL,
	timer_id    bytea NOT NULL,
	record      bytea NOT NULL,
	PRIMARY KEY (workflow_id, timer_id)
);

-- One row per pollable task (engine.QueueEntry): a workflow task has an
-- empty activity id.
CREATE TABLE queue (
	kind        smallint NOT NULL,
	task_queue  bytea NOT NULL,
	due         bigint NOT NULL,
	seq         bigint NOT NULL,
	workflow_id bytea NOT NULL,
	activity_id bytea NOT NULL
);
CREATE UNIQUE INDEX queue_order ON queue
	(kind, length(task_queue), task_queue, due, seq, length(workflow_id), workflow_id, activity_id);
CREATE INDEX queue_owner ON queue (workflow_id, activity_id);

-- Every timer of every kind (engine.Timer); id is the activity or timer id,
-- empty for a workflow task's lease.
CREATE TABLE timers (
	due         bigint NOT NULL,
	kind        smallint NOT NULL,
	workflow_id bytea NOT NULL,
	id          bytea NOT NULL
);
CREATE UNIQUE INDEX timers_order ON timers (due, kind, length(workflow_id), workflow_id, id);
CREATE INDEX timers_owner ON timers (workflow_id, id);

CREATE TABLE finished_activities (
	workflow_id bytea NOT NULL,
	activity_id bytea NOT NULL,
	finished_at bigint NOT NULL,
	record      bytea NOT NULL,
	PRIMARY KEY (workflow_id, activity_id)
);
CREATE INDEX finished_activities_time ON finished_activities
	(finished_at, length(workflow_id), workflow_id, activity_id);

CREATE TABLE latency (
	activity_type bytea PRIMARY KEY,
	record        bytea NOT NULL
);

CREATE TABLE latency_hours (
	activity_type bytea NOT NULL,
	hour          bigint NOT NULL,
	record        bytea NOT NULL
);
CREATE UNIQUE INDEX latency_hours_order ON latency_hours (length(activity_type), activity_type, hour);

CREATE TABLE policy_overrides (
	activity_type bytea NOT NULL,
	task_queue    bytea NOT NULL,
	record        bytea NOT NULL
);
CREATE UNIQUE INDEX policy_overrides_order ON policy_overrides (length(activity_type), activity_type, task_queue);

CREATE TABLE audit (
	at     bigint NOT NULL,
	id     bigint NOT NULL,
	record bytea NOT NULL,
	PRIMARY KEY (at, id)
);

CREATE TABLE operations (
	seq    bigint PRIMARY KEY,
	record bytea NOT NULL
);

CREATE TABLE operation_items (
	seq bigint NOT NULL,
	idx bigint NOT NULL,
	ref bytea NOT NULL,
	PRIMARY KEY (seq, idx)
);

-- The engine's id sequence: one row.
CREATE TABLE counter (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	n   bigint NOT NULL
);
