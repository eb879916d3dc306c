-- run_attempts keeps the outcome of every recorded attempt of a run,
-- written with the result in the same transaction and deleted with the
-- run. output and error hold their first 4 KiB; response_headers is the
-- JSON object of the HTTP answer's headers, secret-named ones redacted.
CREATE TABLE run_attempts (
	run_id           TEXT         NOT NULL,
	attempt          INTEGER      NOT NULL,
	node             TEXT         NOT NULL DEFAULT '',
	started_at       BIGINT       NULL,
	finished_at      BIGINT       NULL,
	duration_ms      BIGINT       NOT NULL DEFAULT 0,
	status           VARCHAR(16)  NOT NULL,
	http_status      INTEGER      NOT NULL DEFAULT 0,
	response_headers TEXT         NOT NULL DEFAULT '',
	error            TEXT         NOT NULL DEFAULT '',
	output           TEXT         NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, attempt)
);
-- A rerun names the run it runs again and keeps that run's scheduled
-- instant, which its callbacks carry.
ALTER TABLE runs ADD COLUMN rerun_of TEXT NULL, ADD COLUMN rerun_scheduled_at BIGINT NULL;
