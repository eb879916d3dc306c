-- failures counts a run's attempts that ran and failed (a lease recovery,
-- a fence or a hand-off is not one): retry.max_attempts bounds it.
ALTER TABLE runs ADD COLUMN failures INT NOT NULL DEFAULT 0;
-- fires_pruned counts the ended scheduled fires of a timer that retention
-- deleted, so that policy.max_fires still counts them.
ALTER TABLE timers ADD COLUMN fires_pruned INT NOT NULL DEFAULT 0;
-- standby is set while a node claims nothing (its clock is off the
-- store's): no work is placed on it, and what was is freed.
ALTER TABLE nodes ADD COLUMN standby TINYINT(1) NOT NULL DEFAULT 0;
