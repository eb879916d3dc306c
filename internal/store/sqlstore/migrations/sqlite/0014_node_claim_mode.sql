-- Each node publishes with its
-- heartbeat how it claims runs ('lazy' or 'eager'; NULL from a node of an
-- older version, which claims with a write), so that a node with lazy
-- claims takes no slice while a live node claims with a write.
ALTER TABLE nodes ADD COLUMN claim_mode TEXT NULL;
