-- Priorities and failure notifications (docs/workflows.md). A timer's
-- priority (0-9, default 5) and its notification rules (JSON, '' for none).
ALTER TABLE timers ADD COLUMN priority INTEGER NOT NULL DEFAULT 5;
ALTER TABLE timers ADD COLUMN notify TEXT NOT NULL DEFAULT '';
-- A run's final result waiting to become its notifications, written in the
-- result's transaction (the outbox); claim_until fences its expansion.
CREATE TABLE notify_events (
	run_id      TEXT    NOT NULL,
	attempt     INTEGER NOT NULL,
	timer_id    TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	finished_at INTEGER NOT NULL,
	claim_until INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (run_id, attempt)
);
-- One delivery of a notification; next_at is when it is due (or when the
-- claim of the delivery in flight ends).
CREATE TABLE notifications (
	id         TEXT    NOT NULL PRIMARY KEY,
	run_id     TEXT    NOT NULL,
	timer_id   TEXT    NOT NULL,
	app        TEXT    NOT NULL,
	on_event   TEXT    NOT NULL,
	channel    TEXT    NOT NULL,
	target     TEXT    NOT NULL,
	payload    TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	attempts   INTEGER NOT NULL DEFAULT 0,
	next_at    INTEGER NOT NULL,
	sent_at    INTEGER NULL,
	error      TEXT    NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL
);
CREATE INDEX notifications_status_next_at ON notifications (status, next_at);
CREATE INDEX notifications_run_id ON notifications (run_id);
-- An app's default notification rules, for its timers that set none.
CREATE TABLE app_notify (
	app        TEXT    NOT NULL PRIMARY KEY,
	notify     TEXT    NOT NULL,
	updated_at INTEGER NOT NULL
);
