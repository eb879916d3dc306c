-- Dependencies between timers (model.Timer.After): timer_id runs after
-- upstream_id has ended as on_status says. seen_run is the join's state:
-- the upstream run that ended that way since timer_id's last run after its
-- upstreams ('' for none). A run made by an upstream run's end names it in
-- upstream_run_id, unique per timer, so that one upstream run's end makes
-- at most one run of each downstream timer.
CREATE TABLE timer_deps (
	timer_id    TEXT    NOT NULL,
	upstream_id TEXT    NOT NULL,
	on_status   TEXT    NOT NULL,
	position    INTEGER NOT NULL,
	seen_run    TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (timer_id, upstream_id)
);
CREATE INDEX timer_deps_upstream ON timer_deps (upstream_id);
ALTER TABLE runs ADD COLUMN upstream_run_id TEXT NULL;
CREATE UNIQUE INDEX runs_timer_upstream ON runs (timer_id, upstream_run_id) WHERE upstream_run_id IS NOT NULL;
