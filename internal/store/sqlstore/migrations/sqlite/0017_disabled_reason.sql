-- Why chime itself disabled a timer (model.Timer.DisabledReason), empty
-- when it did not. Applying this migration also disables every enabled
-- timer whose shell action sets an environment variable that shell
-- actions may no longer set (model.CheckShellEnvName), recording why:
-- see disableForbiddenShellEnv.
ALTER TABLE timers ADD COLUMN disabled_reason TEXT NOT NULL DEFAULT '';
