-- run_attempts keeps the outcome of every recorded attempt of a run,
-- written with the result in the same transaction and deleted with the
-- run. output and error hold their first 4 KiB; response_headers is the
-- JSON object of the HTTP answer's headers, secret-named ones redacted.
CREATE TABLE run_attempts (
	run_id           VARCHAR(40)  NOT NULL,
	attempt          INT          NOT NULL,
	node             VARCHAR(255) NOT NULL DEFAULT '',
	started_at       BIGINT       NULL,
	finished_at      BIGINT       NULL,
	duration_ms      BIGINT       NOT NULL DEFAULT 0,
	status           VARCHAR(16)  NOT NULL,
	http_status      INT          NOT NULL DEFAULT 0,
	response_headers TEXT         NOT NULL,
	error            TEXT         NOT NULL,
	output           TEXT         NOT NULL,
	PRIMARY KEY (run_id, attempt)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- A rerun names the run it runs again and keeps that run's scheduled
-- instant, which its callbacks carry.
ALTER TABLE runs ADD COLUMN rerun_of VARCHAR(40) NULL, ADD COLUMN rerun_scheduled_at BIGINT NULL;
