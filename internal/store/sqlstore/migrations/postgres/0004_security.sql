-- API tokens (hashed), the audit log and the apps' callback signing secrets.
CREATE TABLE tokens (
	id         VARCHAR(64)  NOT NULL PRIMARY KEY,
	name       VARCHAR(255) NOT NULL,
	role       VARCHAR(16)  NOT NULL,
	apps       TEXT         NOT NULL,
	hash       VARCHAR(64)  NOT NULL UNIQUE,
	created_at BIGINT       NOT NULL
);
CREATE TABLE audit (
	id         VARCHAR(64)  NOT NULL PRIMARY KEY,
	at         BIGINT       NOT NULL,
	token_id   VARCHAR(64)  NOT NULL,
	token_name VARCHAR(255) NOT NULL,
	remote     VARCHAR(255) NOT NULL,
	app        VARCHAR(128) NOT NULL,
	target     VARCHAR(128) NOT NULL,
	action     VARCHAR(64)  NOT NULL,
	detail     TEXT         NOT NULL
);
CREATE INDEX audit_app_id ON audit (app, id);
CREATE INDEX audit_target_id ON audit (target, id);
CREATE TABLE signing_secrets (
	app        VARCHAR(128) NOT NULL,
	version    INT          NOT NULL,
	secret     TEXT         NOT NULL,
	created_at BIGINT       NOT NULL,
	expires_at BIGINT       NOT NULL DEFAULT 0,
	PRIMARY KEY (app, version)
);
