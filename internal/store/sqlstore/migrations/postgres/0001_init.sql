CREATE TABLE timers (
	id            VARCHAR(64) NOT NULL PRIMARY KEY,
	app           TEXT        NOT NULL,
	name          TEXT        NOT NULL,
	description   TEXT        NOT NULL DEFAULT '',
	schedule      TEXT        NOT NULL,
	timezone      TEXT        NOT NULL,
	enabled       BOOLEAN     NOT NULL,
	action        TEXT        NOT NULL,
	timeout_ns    BIGINT      NOT NULL,
	retry         TEXT        NOT NULL,
	policy        TEXT        NOT NULL DEFAULT '',
	created_at    BIGINT      NOT NULL,
	updated_at    BIGINT      NOT NULL,
	planned_until BIGINT      NOT NULL DEFAULT 0,
	version       BIGINT NOT NULL DEFAULT 0,
	UNIQUE (app, name)
);
CREATE INDEX timers_enabled_planned_until ON timers (enabled, planned_until);
CREATE INDEX timers_app_id ON timers (app, id);
CREATE TABLE runs (
	id           VARCHAR(32) NOT NULL PRIMARY KEY,
	timer_id     VARCHAR(64) NOT NULL,
	timer_hash   BIGINT      NOT NULL DEFAULT 0,
	scheduled_at BIGINT      NOT NULL,
	due_at       BIGINT      NOT NULL,
	status       VARCHAR(16) NOT NULL,
	attempt      INTEGER     NOT NULL DEFAULT 0,
	started_at   BIGINT      NULL,
	finished_at  BIGINT      NULL,
	duration_ms  BIGINT      NOT NULL DEFAULT 0,
	output       TEXT        NOT NULL DEFAULT '',
	error        TEXT        NOT NULL DEFAULT '',
	node         TEXT        NOT NULL DEFAULT '',
	lease_until  BIGINT      NULL,
	manual       BOOLEAN     NOT NULL DEFAULT FALSE,
	created_at   BIGINT      NOT NULL,
	UNIQUE (timer_id, scheduled_at)
);
CREATE INDEX runs_status_due_at ON runs (status, due_at);
CREATE INDEX runs_status_lease_until ON runs (status, lease_until);
CREATE TABLE nodes (
	id         TEXT   NOT NULL PRIMARY KEY,
	addr       TEXT   NOT NULL,
	started_at BIGINT NOT NULL,
	seen_at    BIGINT NOT NULL,
	slices     TEXT   NOT NULL
);
