-- Dependencies between timers (model.Timer.After): timer_id runs after
-- upstream_id has ended as on_status says. seen_run is the join's state:
-- the upstream run that ended that way since timer_id's last run after its
-- upstreams ('' for none). A run made by an upstream run's end names it in
-- upstream_run_id, unique per timer (NULLs do not collide), so that one
-- upstream run's end makes at most one run of each downstream timer.
CREATE TABLE timer_deps (
	timer_id    VARCHAR(64) NOT NULL,
	upstream_id VARCHAR(64) NOT NULL,
	on_status   VARCHAR(16) NOT NULL,
	position    INT         NOT NULL,
	seen_run    VARCHAR(32) NOT NULL DEFAULT '',
	PRIMARY KEY (timer_id, upstream_id),
	KEY timer_deps_upstream (upstream_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE runs ADD COLUMN upstream_run_id VARCHAR(32) NULL;
CREATE UNIQUE INDEX runs_timer_upstream ON runs (timer_id, upstream_run_id);
