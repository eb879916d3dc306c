-- Run ids of 40 hex digits (model.RunID: the instant's second, the
-- timer's key, a 64-bit hash), so that a second's runs order by timer
-- like the (timer_id, scheduled_at) index. Runs of older nodes keep their
-- ids of 32 digits. Widening a VARCHAR rewrites nothing on PostgreSQL.
ALTER TABLE runs ALTER COLUMN id TYPE VARCHAR(40), ALTER COLUMN fire_id TYPE VARCHAR(40);
