-- Rebuild runs as a WITHOUT ROWID table clustered on its id. Run ids start
-- with their instant's second (model.RunID), so the runs due together share
-- pages: a claim or a result of a second's runs rewrites a few pages instead
-- of one page per run scattered over the table in planning order.
CREATE TABLE runs_new (
	id           TEXT    NOT NULL PRIMARY KEY,
	timer_id     TEXT    NOT NULL,
	timer_hash   INTEGER NOT NULL DEFAULT 0,
	scheduled_at INTEGER NOT NULL,
	due_at       INTEGER NOT NULL,
	status       TEXT    NOT NULL,
	attempt      INTEGER NOT NULL DEFAULT 0,
	started_at   INTEGER NULL,
	finished_at  INTEGER NULL,
	duration_ms  INTEGER NOT NULL DEFAULT 0,
	output       TEXT    NOT NULL DEFAULT '',
	error        TEXT    NOT NULL DEFAULT '',
	node         TEXT    NOT NULL DEFAULT '',
	lease_until  INTEGER NULL,
	manual       INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL,
	UNIQUE (timer_id, scheduled_at)
) WITHOUT ROWID;
INSERT INTO runs_new (id, timer_id, timer_hash, scheduled_at, due_at, status, attempt, started_at, finished_at,
	duration_ms, output, error, node, lease_until, manual, created_at)
SELECT id, timer_id, timer_hash, scheduled_at, due_at, status, attempt, started_at, finished_at,
	duration_ms, output, error, node, lease_until, manual, created_at FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_pending_due_at ON runs (due_at) WHERE status = 'pending';
CREATE INDEX runs_running_lease_until ON runs (lease_until) WHERE status = 'running';
