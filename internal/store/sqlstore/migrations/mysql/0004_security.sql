-- API tokens (hashed), the audit log and the apps' callback signing secrets.
CREATE TABLE tokens (
	id         VARCHAR(64)  NOT NULL PRIMARY KEY,
	name       VARCHAR(255) NOT NULL,
	role       VARCHAR(16)  NOT NULL,
	apps       TEXT         NOT NULL,
	hash       VARCHAR(64)  NOT NULL,
	created_at BIGINT       NOT NULL,
	UNIQUE KEY tokens_hash (hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE audit (
	id         VARCHAR(64)  NOT NULL PRIMARY KEY,
	at         BIGINT       NOT NULL,
	token_id   VARCHAR(64)  NOT NULL,
	token_name VARCHAR(255) NOT NULL,
	remote     VARCHAR(255) NOT NULL,
	app        VARCHAR(128) NOT NULL,
	target     VARCHAR(128) NOT NULL,
	action     VARCHAR(64)  NOT NULL,
	detail     TEXT         NOT NULL,
	KEY audit_app_id (app, id),
	KEY audit_target_id (target, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE signing_secrets (
	app        VARCHAR(128) NOT NULL,
	version    INT          NOT NULL,
	secret     TEXT         NOT NULL,
	created_at BIGINT       NOT NULL,
	expires_at BIGINT       NOT NULL DEFAULT 0,
	PRIMARY KEY (app, version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
