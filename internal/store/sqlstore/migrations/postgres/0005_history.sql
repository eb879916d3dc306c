-- A timer's run retention (model.History) as JSON: '' follows the server's
-- defaults. The retention part deletes old audit entries by their time.
ALTER TABLE timers ADD COLUMN history TEXT NOT NULL DEFAULT '';
CREATE INDEX audit_at ON audit (at);
