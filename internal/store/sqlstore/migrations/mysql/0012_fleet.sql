-- Fleet: the handlers each node advertises with its heartbeat
-- (JSON array; NULL from a node of an older version), and the runs of a
-- fire split over nodes (broadcast, shards). fire_id is the id of the
-- fire's own run, on it and on each of its shards; shard_index is -1 on
-- every run that is not a shard; target_node, when not '', is the only
-- node that may claim the pending run (a shard placed on a node, a run
-- handed to a node that has its handler).
ALTER TABLE nodes ADD COLUMN handlers MEDIUMTEXT NULL;
ALTER TABLE runs ADD COLUMN fire_id VARCHAR(32) NOT NULL DEFAULT '',
	ADD COLUMN shard_index INT NOT NULL DEFAULT -1,
	ADD COLUMN shard_total INT NOT NULL DEFAULT 0,
	ADD COLUMN target_node VARCHAR(255) NOT NULL DEFAULT '',
	ADD INDEX runs_pending_target (target_node, status, due_at),
	ADD INDEX runs_fire (fire_id);
