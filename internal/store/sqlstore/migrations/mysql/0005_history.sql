-- A timer's run retention (model.History) as JSON: '' follows the server's
-- defaults. The retention part deletes old audit entries by their time.
ALTER TABLE timers ADD COLUMN history VARCHAR(255) NOT NULL DEFAULT '';
ALTER TABLE audit ADD INDEX audit_at (at);
