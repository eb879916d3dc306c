package sqlstore

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

// TestUpgradeDisablesForbiddenShellEnv: migration 0017 disables, with the
// reason recorded, each enabled timer whose shell action sets an
// environment variable shell actions may no longer set, and deletes its
// pending runs; every other timer (a shell action with allowed names, an
// HTTP action) stays enabled with its runs.
func TestUpgradeDisablesForbiddenShellEnv(t *testing.T) {
	dsns := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "u.db") },
		"mariadb":  func(t *testing.T) string { return testenv.MySQLDatabase(t) },
		"postgres": func(t *testing.T) string { return testenv.PostgresDatabase(t) },
	}
	for name, mk := range dsns {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := mk(t)
			ctx := t.Context()
			s := mustOpen(t, dsn)
			shell := func(name string, env map[string]string) *model.Timer {
				tm := storetest.NewTimer("app", name)
				tm.Action = model.Action{Type: model.ActionShell, Shell: &model.ShellAction{Command: "backup", Env: env}}
				if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.InsertRuns(ctx, storetest.NewRuns(tm.ID, time.Now().Add(time.Hour), time.Second, 2)); err != nil {
					t.Fatal(err)
				}
				return tm
			}
			bad := shell("bad", map[string]string{"MODE": "full", "LD_PRELOAD": "/tmp/evil.so"})
			badFunc := shell("bad-func", map[string]string{"BASH_FUNC_echo%%": "() { id; }"})
			good := shell("good", map[string]string{"MODE": "full", "API_TOKEN": "t"})
			web := storetest.NewTimer("app", "web")
			if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: web, Create: true}); err != nil {
				t.Fatal(err)
			}
			// The database as a chime before migration 0017 left it.
			for _, q := range []string{`ALTER TABLE timers DROP COLUMN disabled_reason`, `DELETE FROM schema_migrations WHERE version = 17`} {
				if _, err := s.w.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			s.Close()

			s = mustOpen(t, dsn)
			for _, tc := range []struct {
				tm      *model.Timer
				enabled bool
				reason  string
				pending int
			}{
				{bad, false, "LD_PRELOAD", 0},
				{badFunc, false, "BASH_FUNC_echo%%", 0},
				{good, true, "", 2},
				{web, true, "", 0},
			} {
				got, err := s.GetTimer(ctx, tc.tm.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Enabled != tc.enabled || (tc.reason == "") != (got.DisabledReason == "") || !strings.Contains(got.DisabledReason, tc.reason) {
					t.Errorf("%s: enabled %v, reason %q; want enabled %v, a reason naming %q", got.Name, got.Enabled, got.DisabledReason, tc.enabled, tc.reason)
				}
				var n int
				if err := s.r.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM runs WHERE timer_id = ? AND status = 'pending'`), tc.tm.ID).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != tc.pending {
					t.Errorf("%s: %d pending runs, want %d", got.Name, n, tc.pending)
				}
			}
			// Enabling clears the reason through a save; the store keeps
			// what it is given.
			got, _ := s.GetTimer(ctx, bad.ID)
			got.DisabledReason = ""
			if err := s.UpdateTimer(ctx, got); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.GetTimer(ctx, bad.ID); got.DisabledReason != "" {
				t.Errorf("reason after an update without it: %q", got.DisabledReason)
			}
		})
	}
}
