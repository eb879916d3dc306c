-- The web UI.
--
-- timers.next_fire_at: the timer's first fire after the last write of its
-- row (a save, or a planning pass that moved its planned_until), in Unix
-- nanoseconds; 9223372036854775807 (the largest BIGINT) when it has none
-- (disabled, or no fire left). GET /api/v1/timers?sort=next_fire pages
-- over (next_fire_at, id). It may lag the true next fire by what the
-- planner's passes leave (see store.TimerFilter.Sort).
ALTER TABLE timers ADD COLUMN next_fire_at BIGINT NOT NULL DEFAULT 9223372036854775807;
CREATE INDEX timers_next_fire ON timers (next_fire_at, id);
CREATE INDEX timers_app_next_fire ON timers (app, next_fire_at, id);
-- runs.request: what the executor sent for the run's last attempt (JSON of
-- model.SentRequest, secrets redacted), written with its result; '' when
-- none was recorded.
ALTER TABLE runs ADD COLUMN request TEXT NOT NULL DEFAULT '';
-- stats_minutes: each node's counts of one minute for the dashboard
-- (GET /api/v1/stats/series): finished attempts by status and a histogram
-- of fire delays, JSON, and the node's noted timers (failing or late).
-- One row per (minute, node), upserted as the minute goes; rows older
-- than a few hours are deleted.
CREATE TABLE stats_minutes (
	minute  BIGINT NOT NULL,
	node    TEXT NOT NULL,
	fires   TEXT NOT NULL,
	delays  TEXT NOT NULL,
	timers  TEXT NOT NULL,
	PRIMARY KEY (minute, node)
);
