-- Fleet: the handlers each node advertises with its heartbeat
-- (JSON array; NULL from a node of an older version), and the runs of a
-- fire split over nodes (broadcast, shards). fire_id is the id of the
-- fire's own run, on it and on each of its shards; shard_index is -1 on
-- every run that is not a shard; target_node, when not '', is the only
-- node that may claim the pending run (a shard placed on a node, a run
-- handed to a node that has its handler).
ALTER TABLE nodes ADD COLUMN handlers TEXT NULL;
ALTER TABLE runs ADD COLUMN fire_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN shard_index INTEGER NOT NULL DEFAULT -1;
ALTER TABLE runs ADD COLUMN shard_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN target_node TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_pending_target ON runs (target_node, due_at) WHERE status = 'pending' AND target_node <> '';
CREATE INDEX runs_fire ON runs (fire_id) WHERE fire_id <> '';
