-- API tokens may expire (expires_at, Unix nanoseconds; 0: never), and
-- record when they were last used (last_used_at, written at most once a
-- minute per token; 0: never).
ALTER TABLE tokens ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN last_used_at INTEGER NOT NULL DEFAULT 0;
