-- The lists of runs across timers (ListRuns, RunCounts), newest first:
-- every run by instant (with its status, so that a count of the pending or
-- running runs of a period reads the index alone), and the ended runs by
-- status and instant, so that a page or a count is a range of an index
-- whatever the history's size. The second is partial: it gets one entry
-- per run, when the run ends, and it cannot be chosen for the pending and
-- running runs, which have indexes of their own.
CREATE INDEX runs_scheduled ON runs (scheduled_at, id, status);
CREATE INDEX runs_ended_scheduled ON runs (status, scheduled_at, id)
	WHERE status = 'succeeded' OR status = 'failed' OR status = 'skipped' OR status = 'cancelled';
