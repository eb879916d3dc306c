-- Runs are pending or running for seconds and finished for ever after: index
-- only the live ones. Planning, claiming and recording then update two small
-- indexes instead of two indexes over the whole history.
DROP INDEX runs_status_due_at;
DROP INDEX runs_status_lease_until;
CREATE INDEX runs_pending_due_at ON runs (due_at) WHERE status = 'pending';
CREATE INDEX runs_running_lease_until ON runs (lease_until) WHERE status = 'running';
