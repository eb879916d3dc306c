-- Coordination in the database (--coordination db): the slice locks and
-- the leader elections as lease rows, judged by the database's clock
-- (expires_at in microseconds since the Unix epoch). gen changes at every
-- write, so that an extension within the same microsecond still counts as
-- a changed row. Each node also publishes its coordination mode, so that
-- nodes of one cluster that disagree are refused at start.
CREATE TABLE coord_locks (
  name TEXT NOT NULL PRIMARY KEY,
  token TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  gen BIGINT NOT NULL
);
CREATE INDEX coord_locks_expires ON coord_locks (expires_at);
ALTER TABLE nodes ADD COLUMN coordination TEXT NULL;
