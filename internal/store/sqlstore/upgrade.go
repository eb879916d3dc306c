package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/chimehq/chime/model"
)

// dataMigrations are the steps written in Go that a migration takes after
// its SQL, in the same transaction, keyed by the migration's version.
var dataMigrations = map[int]func(ctx context.Context, s *core, tx *sql.Tx) error{
	17: disableForbiddenShellEnv,
}

// maxDisabledReason bounds a stored DisabledReason, in bytes (the MySQL
// column is VARCHAR(1000)).
const maxDisabledReason = 900

// disableForbiddenShellEnv disables every enabled timer whose shell action
// sets an environment variable that model.CheckShellEnvName refuses
// (LD_PRELOAD, BASH_FUNC_…, SHELLOPTS…), which the API accepted before it
// refused them: it records why in disabled_reason and deletes the timer's
// pending runs. Every other timer is left as it is. The shell runner
// refuses such a run too, so a run another node claimed meanwhile fails
// without starting its command.
func disableForbiddenShellEnv(ctx context.Context, s *core, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, s.q(`SELECT id, app, name, action FROM timers WHERE enabled = ?`), true)
	if err != nil {
		return fmt.Errorf("read timers: %w", err)
	}
	type bad struct{ id, app, name, reason string }
	var found []bad
	for rows.Next() {
		var id, app, name, action string
		if err := rows.Scan(&id, &app, &name, &action); err != nil {
			rows.Close()
			return fmt.Errorf("read timers: %w", err)
		}
		var a model.Action
		if json.Unmarshal([]byte(action), &a) != nil || a.Shell == nil {
			continue
		}
		if err := model.CheckShellEnv(a.Shell.Env); err != nil {
			reason := "disabled at upgrade: " + err.Error()
			if len(reason) > maxDisabledReason {
				reason = strings.ToValidUTF8(reason[:maxDisabledReason], "")
			}
			found = append(found, bad{id, app, name, reason})
		}
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("read timers: %w", err)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read timers: %w", err)
	}
	for _, b := range found {
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE timers SET enabled = ?, disabled_reason = ?, next_fire_at = ?, planned_until = 0,
			version = version + 1 WHERE id = ?`), false, b.reason, int64(noNextFire), b.id); err != nil {
			return fmt.Errorf("disable timer %s: %w", b.id, err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM runs WHERE timer_id = ? AND status = 'pending'`), b.id); err != nil {
			return fmt.Errorf("disable timer %s: delete its pending runs: %w", b.id, err)
		}
		slog.Default().Warn("timer disabled at upgrade", "timer", b.id, "app", b.app, "name", b.name, "reason", b.reason)
	}
	return nil
}
