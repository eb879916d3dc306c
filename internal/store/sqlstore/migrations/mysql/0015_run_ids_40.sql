-- Run ids of 40 hex digits (model.RunID: the instant's second, the
-- timer's key, a 64-bit hash), so that a second's runs order by timer
-- like the (timer_id, scheduled_at) index. Runs of older nodes keep their
-- ids of 32 digits.
ALTER TABLE runs MODIFY id VARCHAR(40) NOT NULL,
	MODIFY upstream_run_id VARCHAR(40) NULL,
	MODIFY fire_id VARCHAR(40) NOT NULL DEFAULT '';
ALTER TABLE timer_deps MODIFY seen_run VARCHAR(40) NOT NULL DEFAULT '';
ALTER TABLE notify_events MODIFY run_id VARCHAR(40) NOT NULL;
ALTER TABLE notifications MODIFY run_id VARCHAR(40) NOT NULL;
