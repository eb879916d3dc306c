-- Secrets kept per app, which actions refer to as {{secret.NAME}}: the
-- value is encrypted with --secret-key when one is configured, hosts and
-- commands (JSON arrays) are where it may be sent.
CREATE TABLE app_secrets (
	app        TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	value      TEXT    NOT NULL,
	hosts      TEXT    NOT NULL,
	commands   TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (app, name)
);
