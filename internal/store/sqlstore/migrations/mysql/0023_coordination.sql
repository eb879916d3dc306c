-- Coordination in the database (--coordination db): the slice locks and
-- the leader elections as lease rows, judged by the database's clock
-- (expires_at in microseconds since the Unix epoch). gen changes at every
-- write, so that an extension within the same microsecond still counts as
-- a changed row. Each node also publishes its coordination mode, so that
-- nodes of one cluster that disagree are refused at start.
CREATE TABLE coord_locks (
  name VARCHAR(191) NOT NULL PRIMARY KEY,
  token VARCHAR(191) NOT NULL,
  expires_at BIGINT NOT NULL,
  gen BIGINT NOT NULL,
  INDEX coord_locks_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE nodes ADD COLUMN coordination VARCHAR(16) NULL;
