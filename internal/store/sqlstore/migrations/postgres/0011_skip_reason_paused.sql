-- Why a fire did not run (model.Run.Reason: a short code such as misfire,
-- overlap or paused; empty for runs that ran), and a timer's pause
-- (model.Timer.Paused: its fires are recorded skipped, reason paused).
ALTER TABLE runs ADD COLUMN reason VARCHAR(32) NOT NULL DEFAULT '';
ALTER TABLE timers ADD COLUMN paused BOOLEAN NOT NULL DEFAULT FALSE;
