-- TimersToPlan pages through timers in (planned_until, id) order: with id in
-- the index each page is an index range, instead of a sort of every timer
-- to plan for every page.
DROP INDEX timers_enabled_planned_until;
CREATE INDEX timers_enabled_planned_until_id ON timers (enabled, planned_until, id);
