CREATE TABLE timers (
	id            TEXT    NOT NULL PRIMARY KEY,
	app           TEXT    NOT NULL,
	name          TEXT    NOT NULL,
	description   TEXT    NOT NULL DEFAULT '',
	schedule      TEXT    NOT NULL,
	timezone      TEXT    NOT NULL,
	enabled       INTEGER NOT NULL,
	action        TEXT    NOT NULL,
	timeout_ns    INTEGER NOT NULL,
	retry         TEXT    NOT NULL,
	policy        TEXT    NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	planned_until INTEGER NOT NULL DEFAULT 0,
	version       BIGINT NOT NULL DEFAULT 0,
	UNIQUE (app, name)
);
CREATE INDEX timers_enabled_planned_until ON timers (enabled, planned_until);
CREATE INDEX timers_app_id ON timers (app, id);
CREATE TABLE runs (
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
);
CREATE INDEX runs_status_due_at ON runs (status, due_at);
CREATE INDEX runs_status_lease_until ON runs (status, lease_until);
CREATE TABLE nodes (
	id         TEXT    NOT NULL PRIMARY KEY,
	addr       TEXT    NOT NULL,
	started_at INTEGER NOT NULL,
	seen_at    INTEGER NOT NULL,
	slices     TEXT    NOT NULL
);
