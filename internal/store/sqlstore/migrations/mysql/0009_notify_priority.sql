-- Priorities and failure notifications (docs/workflows.md). A timer's
-- priority (0-9, default 5) and its notification rules (JSON, '' for none).
ALTER TABLE timers ADD COLUMN priority INT NOT NULL DEFAULT 5;
ALTER TABLE timers ADD COLUMN notify TEXT NOT NULL;
-- A run's final result waiting to become its notifications, written in the
-- result's transaction (the outbox); claim_until fences its expansion.
CREATE TABLE notify_events (
	run_id      VARCHAR(32) NOT NULL,
	attempt     INT         NOT NULL,
	timer_id    VARCHAR(64) NOT NULL,
	status      VARCHAR(16) NOT NULL,
	finished_at BIGINT      NOT NULL,
	claim_until BIGINT      NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, attempt)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- One delivery of a notification; next_at is when it is due (or when the
-- claim of the delivery in flight ends).
CREATE TABLE notifications (
	id         VARCHAR(128) NOT NULL PRIMARY KEY,
	run_id     VARCHAR(32)  NOT NULL,
	timer_id   VARCHAR(64)  NOT NULL,
	app        VARCHAR(128) NOT NULL,
	on_event   VARCHAR(32)  NOT NULL,
	channel    VARCHAR(16)  NOT NULL,
	target     TEXT         NOT NULL,
	payload    MEDIUMTEXT   NOT NULL,
	status     VARCHAR(16)  NOT NULL,
	attempts   INT          NOT NULL DEFAULT 0,
	next_at    BIGINT       NOT NULL,
	sent_at    BIGINT       NULL,
	error      TEXT         NOT NULL,
	created_at BIGINT       NOT NULL,
	KEY notifications_status_next_at (status, next_at),
	KEY notifications_run_id (run_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- An app's default notification rules, for its timers that set none.
CREATE TABLE app_notify (
	app        VARCHAR(128) NOT NULL PRIMARY KEY,
	notify     TEXT         NOT NULL,
	updated_at BIGINT       NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
