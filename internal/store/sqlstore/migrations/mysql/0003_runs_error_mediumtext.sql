-- A run's error is up to store.MaxResultText (256 KiB) of text, like its
-- output: TEXT holds 65,535 bytes, and a statement that wrote more failed in
-- strict mode (and was cut silently otherwise). MEDIUMTEXT holds 16 MiB.
-- The table is rebuilt: on a large runs table this takes a while, once.
ALTER TABLE runs MODIFY error MEDIUMTEXT NOT NULL;
