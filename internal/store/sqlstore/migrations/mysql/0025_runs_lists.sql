-- The lists of runs across timers (ListRuns, RunCounts), newest first:
-- every run by instant, and by status and instant, so that a page or a
-- count is a range of an index whatever the history's size. The first is
-- written once per run (scheduled_at and id never change), the second at
-- each status change, as runs_status_due_at is.
ALTER TABLE runs ADD INDEX runs_scheduled (scheduled_at, id),
	ADD INDEX runs_status_scheduled (status, scheduled_at, id);
