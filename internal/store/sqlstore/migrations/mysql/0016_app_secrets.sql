-- Secrets kept per app, which actions refer to as {{secret.NAME}}: the
-- value is encrypted with --secret-key when one is configured, hosts and
-- commands (JSON arrays) are where it may be sent.
CREATE TABLE app_secrets (
	app        VARCHAR(128) NOT NULL,
	name       VARCHAR(64)  NOT NULL,
	value      MEDIUMTEXT   NOT NULL,
	hosts      TEXT         NOT NULL,
	commands   TEXT         NOT NULL,
	created_at BIGINT       NOT NULL,
	updated_at BIGINT       NOT NULL,
	PRIMARY KEY (app, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
