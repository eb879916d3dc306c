CREATE TABLE timers (
	id            VARCHAR(64)  NOT NULL PRIMARY KEY,
	app           VARCHAR(128) NOT NULL,
	name          VARCHAR(255) NOT NULL,
	description   TEXT         NOT NULL,
	schedule      VARCHAR(512) NOT NULL,
	timezone      VARCHAR(64)  NOT NULL,
	enabled       TINYINT(1)   NOT NULL,
	action        MEDIUMTEXT   NOT NULL,
	timeout_ns    BIGINT       NOT NULL,
	retry         TEXT         NOT NULL,
	policy        TEXT         NOT NULL,
	created_at    BIGINT       NOT NULL,
	updated_at    BIGINT       NOT NULL,
	planned_until BIGINT       NOT NULL DEFAULT 0,
	version       BIGINT NOT NULL DEFAULT 0,
	UNIQUE KEY timers_app_name (app, name),
	KEY timers_enabled_planned_until (enabled, planned_until),
	KEY timers_app_id (app, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE runs (
	id           VARCHAR(32)  NOT NULL PRIMARY KEY,
	timer_id     VARCHAR(64)  NOT NULL,
	timer_hash   BIGINT       NOT NULL DEFAULT 0,
	scheduled_at BIGINT       NOT NULL,
	due_at       BIGINT       NOT NULL,
	status       VARCHAR(16)  NOT NULL,
	attempt      INT          NOT NULL DEFAULT 0,
	started_at   BIGINT       NULL,
	finished_at  BIGINT       NULL,
	duration_ms  BIGINT       NOT NULL DEFAULT 0,
	output       MEDIUMTEXT   NOT NULL,
	error        TEXT         NOT NULL,
	node         VARCHAR(255) NOT NULL DEFAULT '',
	lease_until  BIGINT       NULL,
	manual       TINYINT(1)   NOT NULL DEFAULT 0,
	created_at   BIGINT       NOT NULL,
	UNIQUE KEY runs_timer_scheduled (timer_id, scheduled_at),
	KEY runs_status_due_at (status, due_at),
	KEY runs_status_lease_until (status, lease_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE nodes (
	id         VARCHAR(255) NOT NULL PRIMARY KEY,
	addr       VARCHAR(255) NOT NULL,
	started_at BIGINT       NOT NULL,
	seen_at    BIGINT       NOT NULL,
	slices     MEDIUMTEXT   NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
