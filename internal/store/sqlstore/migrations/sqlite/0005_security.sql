-- API tokens (hashed), the audit log and the apps' callback signing secrets.
CREATE TABLE tokens (
	id         TEXT    NOT NULL PRIMARY KEY,
	name       TEXT    NOT NULL,
	role       TEXT    NOT NULL,
	apps       TEXT    NOT NULL,
	hash       TEXT    NOT NULL UNIQUE,
	created_at INTEGER NOT NULL
);
CREATE TABLE audit (
	id         TEXT    NOT NULL PRIMARY KEY,
	at         INTEGER NOT NULL,
	token_id   TEXT    NOT NULL,
	token_name TEXT    NOT NULL,
	remote     TEXT    NOT NULL,
	app        TEXT    NOT NULL,
	target     TEXT    NOT NULL,
	action     TEXT    NOT NULL,
	detail     TEXT    NOT NULL
);
CREATE INDEX audit_app_id ON audit (app, id);
CREATE INDEX audit_target_id ON audit (target, id);
CREATE TABLE signing_secrets (
	app        TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	secret     TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (app, version)
);
