package sqlstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

func TestParseSecretKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	std := base64.StdEncoding.EncodeToString(key)
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("\n  "+std+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, in, wantErr string
	}{
		{name: "std", in: std},
		{name: "trimmed", in: "  " + std + "\n"},
		{name: "raw url", in: base64.RawURLEncoding.EncodeToString(key)},
		{name: "file", in: "@" + file},
		{name: "missing file", in: "@" + filepath.Join(dir, "nope"), wantErr: "read key file"},
		{name: "empty", in: " ", wantErr: "empty key"},
		{name: "not base64", in: "this is not base64!", wantErr: "not base64"},
		{name: "short", in: base64.StdEncoding.EncodeToString(key[:16]), wantErr: "16 bytes, want 32"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSecretKey(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, key) {
				t.Fatalf("got %x, %v", got, err)
			}
		})
	}
	if _, err := Open(context.Background(), "sqlite::memory:", Options{SecretKey: key[:31]}); err == nil {
		t.Error("Open with a 31-byte key succeeded")
	}
}

// secretDSNs make a fresh database of each kind and return its DSN, so
// that a test can open it several times with different keys.
var secretDSNs = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "chime.db") }},
	{"mariadb", func(t *testing.T) string { return testenv.MySQLDatabase(t) }},
	{"postgres", func(t *testing.T) string { return testenv.PostgresDatabase(t) }},
}

func openWith(t *testing.T, dsn string, key []byte) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, Options{SecretKey: key})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// secretTimers are a timer of each kind of secret, with the plaintext
// secrets that must not be stored.
func secretTimers(now time.Time) ([]*model.Timer, []string) {
	mk := func(id string, a model.Action) *model.Timer {
		return &model.Timer{ID: id, App: "a", Name: "n" + id, Schedule: "@every 1h", Timezone: "UTC", Enabled: true,
			Action: a, Timeout: time.Second, Retry: model.RetryPolicy{MaxAttempts: 1}, CreatedAt: now, UpdatedAt: now}
	}
	return []*model.Timer{
			mk("T1", model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST",
				URL: "https://user:url-pass-1@h.test/hook?x=1",
				Header: map[string]string{"Authorization": "Bearer tok-1", "x-api-key": "key-1", "X-Sig": "sig-1",
					"Accept": "application/json"},
				SecretHeaders: []string{"X-Sig"}}}),
			mk("T2", model.Action{Type: model.ActionShell, Shell: &model.ShellAction{Command: "backup",
				Env: map[string]string{"DB_PASSWORD": "env-pass-1", "EMPTY": ""}}}),
		},
		[]string{"url-pass-1", "tok-1", "key-1", "sig-1", "env-pass-1"}
}

func TestSecretsAtRest(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	other := bytes.Repeat([]byte{2}, 32)
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0).UTC()
	for _, be := range secretDSNs {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			dsn := be.dsn(t)
			s := openWith(t, dsn, key)
			timers, plain := secretTimers(now)
			for _, tm := range timers {
				before := tm.Action.Clone()
				if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(tm.Action, before) {
					t.Fatalf("CreateTimer changed the caller's action: %+v", tm.Action)
				}
			}
			if _, err := s.EnsureSigningSecret(ctx, "a", "whsec_signing-1", now); err != nil {
				t.Fatal(err)
			}
			plain = append(plain, "signing-1")

			// The raw columns hold no plaintext secret.
			var raw []string
			for _, q := range []string{`SELECT action FROM timers`, `SELECT secret FROM signing_secrets`} {
				rows, err := s.r.Query(q)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var v string
					if err := rows.Scan(&v); err != nil {
						t.Fatal(err)
					}
					raw = append(raw, v)
				}
				rows.Close()
			}
			all := strings.Join(raw, "\n")
			for _, p := range plain {
				if strings.Contains(all, p) {
					t.Errorf("plaintext %q stored: %s", p, all)
				}
			}
			if n := strings.Count(all, SealedPrefix) + strings.Count(all, "enc%3Av1%3A"); n != 6 {
				t.Errorf("%d sealed values, want 6: %s", n, all)
			}
			if !strings.Contains(all, "application/json") || !strings.Contains(all, "h.test/hook?x=1") {
				t.Errorf("non-secret values not stored in clear: %s", all)
			}

			// Reads decrypt: GetTimer, GetTimerByName, ListTimers, ClaimRuns.
			check := func(what string, got *model.Timer) {
				t.Helper()
				want := timers[0]
				if got.ID == "T2" {
					want = timers[1]
				}
				if !reflect.DeepEqual(got.Action, want.Action) {
					t.Errorf("%s %s: action %+v %+v, want %+v %+v", what, got.ID, got.Action.HTTP, got.Action.Shell, want.Action.HTTP, want.Action.Shell)
				}
			}
			for _, tm := range timers {
				got, err := s.GetTimer(ctx, tm.ID)
				if err != nil {
					t.Fatal(err)
				}
				check("GetTimer", got)
				if got, err = s.GetTimerByName(ctx, tm.App, tm.Name); err != nil {
					t.Fatal(err)
				}
				check("GetTimerByName", got)
			}
			list, _, err := s.ListTimers(ctx, store.TimerFilter{})
			if err != nil || len(list) != 2 {
				t.Fatalf("ListTimers = %d, %v", len(list), err)
			}
			for _, got := range list {
				check("ListTimers", got)
			}
			claimed := claimOne(t, s, "T1", now)
			if len(claimed) != 1 {
				t.Fatalf("claimed %d runs", len(claimed))
			}
			check("ClaimRuns", claimed[0].Timer)
			sec, err := s.ActiveSigningSecrets(ctx, "a", now)
			if err != nil || len(sec) != 1 || sec[0].Secret != "whsec_signing-1" {
				t.Fatalf("ActiveSigningSecrets = %v, %v", sec, err)
			}

			// Another key, or none: clear errors that name the timer.
			for name, k := range map[string][]byte{"wrong key": other, "no key": nil} {
				w := openWith(t, dsn, k)
				_, err := w.GetTimer(ctx, "T1")
				if !errors.Is(err, ErrSecretKey) || !strings.Contains(err.Error(), "T1") || !strings.Contains(err.Error(), "--secret-key") {
					t.Errorf("%s: GetTimer error %v", name, err)
				}
				if _, _, err := w.ListTimers(ctx, store.TimerFilter{}); !errors.Is(err, ErrSecretKey) {
					t.Errorf("%s: ListTimers error %v", name, err)
				}
				if _, err := w.ActiveSigningSecrets(ctx, "a", now); !errors.Is(err, ErrSecretKey) {
					t.Errorf("%s: ActiveSigningSecrets error %v", name, err)
				}
			}
			// A claim of a timer that does not decrypt fails its run with
			// the reason instead of failing the claim.
			w := openWith(t, dsn, other)
			got := claimOne(t, w, "T2", now.Add(time.Hour))
			if len(got) != 0 {
				t.Fatalf("claimed %d runs of an unreadable timer", len(got))
			}
			runs, _, err := w.ListRuns(ctx, store.RunFilter{TimerID: "T2"})
			if err != nil || len(runs) != 1 || runs[0].Status != model.RunFailed || !strings.Contains(runs[0].Error, "T2") ||
				!strings.Contains(runs[0].Error, "does not decrypt") {
				t.Fatalf("runs %+v, %v", runs, err)
			}
		})
	}
}

// claimOne inserts a due run of timer id at at and claims it.
func claimOne(t *testing.T, s *Store, id string, at time.Time) []store.ClaimedRun {
	t.Helper()
	ctx := context.Background()
	run := &model.Run{ID: model.RunID(id, at), TimerID: id, ScheduledAt: at, DueAt: at, Status: model.RunPending, CreatedAt: at}
	if _, err := s.InsertRuns(ctx, []*model.Run{run}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.ClaimRuns(ctx, []store.Claim{{RunID: run.ID, Node: "n1", LeaseUntil: at.Add(time.Minute), Now: at}})
	if err != nil {
		t.Fatalf("ClaimRuns: %v", err)
	}
	return claimed
}

// TestSecretKeyAdded: values stored before a key was configured are read
// as they are, and sealed at their next write.
func TestSecretKeyAdded(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "chime.db")
	timers, _ := secretTimers(time.Unix(1_800_000_000, 0).UTC())
	plain := openWith(t, dsn, nil)
	if _, err := plain.SaveTimer(ctx, store.TimerWrite{Timer: timers[0], Create: true}); err != nil {
		t.Fatal(err)
	}
	// Without a key, a value that would read as sealed is refused.
	bad := *timers[1]
	bad.Action = bad.Action.Clone()
	bad.Action.Shell.Env["X"] = SealedPrefix + "abc"
	if _, err := plain.SaveTimer(ctx, store.TimerWrite{Timer: &bad, Create: true}); err == nil || !strings.Contains(err.Error(), "action.shell.env.X") {
		t.Errorf("CreateTimer of a value with the sealed prefix: %v", err)
	}
	s := openWith(t, dsn, bytes.Repeat([]byte{1}, 32))
	got, err := s.GetTimer(ctx, "T1")
	if err != nil || !reflect.DeepEqual(got.Action, timers[0].Action) {
		t.Fatalf("GetTimer = %+v, %v", got, err)
	}
	if err := s.UpdateTimer(ctx, got); err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := s.r.QueryRow(`SELECT action FROM timers WHERE id = 'T1'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(raw, "tok-1") || !strings.Contains(raw, SealedPrefix) {
		t.Errorf("after the update: %s", raw)
	}
}

// TestSQLiteFileModes: a fresh database, its directory and its -wal and
// -shm files are the owner's only; an existing file keeps its mode.
func TestSQLiteFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "sub")
	path := filepath.Join(dir, "chime.db")
	s := openWith(t, "sqlite://"+path, nil)
	now := time.Unix(1_800_000_000, 0).UTC()
	timers, _ := secretTimers(now)
	if _, err := s.SaveTimer(context.Background(), store.TimerWrite{Timer: timers[0], Create: true}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{dir: 0o700, filepath.Dir(dir): 0o700, path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got&^want != 0 {
			t.Errorf("%s: mode %04o, want at most %04o", name, got, want)
		}
	}
	// An existing file is not chmod-ed (a warning is logged).
	loose := filepath.Join(t.TempDir(), "loose.db")
	if err := os.WriteFile(loose, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(loose, 0o644)
	openWith(t, "sqlite://"+loose, nil)
	if fi, _ := os.Stat(loose); fi.Mode().Perm() != 0o644 {
		t.Errorf("existing file mode changed to %04o", fi.Mode().Perm())
	}
}

// TestMoreSecretsAtRest: a handler's secret args, notification webhook
// URLs (of a timer, of an app, of a notification) and app secrets are
// stored sealed and read in clear.
func TestMoreSecretsAtRest(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0).UTC()
	for _, be := range secretDSNs {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			dsn := be.dsn(t)
			s := openWith(t, dsn, key)
			tm := &model.Timer{ID: "T3", App: "a", Name: "h", Schedule: "@every 1h", Timezone: "UTC", Enabled: true,
				Action: model.Action{Type: model.ActionHandler, Handler: &model.HandlerAction{Name: "sync",
					Args: []byte(`{"pw":"arg-pass-1","user":"u-clear"}`), SecretArgs: []string{"pw"}}},
				Notify: []model.NotifyRule{{On: model.NotifyFailure, Webhook: &model.NotifyWebhook{URL: "https://hooks.test/notify-tok-1"},
					Email: &model.NotifyEmail{To: []string{"ops@example.com"}}}},
				Timeout: time.Second, Retry: model.RetryPolicy{MaxAttempts: 1}, CreatedAt: now, UpdatedAt: now}
			if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
				t.Fatal(err)
			}
			appRules := []model.NotifyRule{{On: model.NotifyFailure, Webhook: &model.NotifyWebhook{URL: "https://hooks.test/app-tok-1"}}}
			if err := s.SetAppNotify(ctx, "a", appRules, now); err != nil {
				t.Fatal(err)
			}
			sec := &model.AppSecret{App: "a", Name: "API", Value: "app-secret-1", Hosts: []string{"api.test"}, CreatedAt: now, UpdatedAt: now}
			if err := s.PutAppSecret(ctx, sec); err != nil {
				t.Fatal(err)
			}
			if _, err := s.w.Exec(s.q(`INSERT INTO notify_events (run_id, attempt, timer_id, status, finished_at, claim_until) VALUES (?, 1, 'T3', 'failed', ?, ?)`),
				"R1", nanos(now), nanos(now)); err != nil {
				t.Fatal(err)
			}
			ns := []*model.Notification{
				{ID: "R1.1.0.webhook", RunID: "R1", TimerID: "T3", App: "a", On: "failure", Channel: model.ChannelWebhook,
					Target: "https://hooks.test/notify-tok-1", Payload: []byte(`{}`), Status: model.NotificationPending, NextAt: now, CreatedAt: now},
				{ID: "R1.1.0.email", RunID: "R1", TimerID: "T3", App: "a", On: "failure", Channel: model.ChannelEmail,
					Target: "ops@example.com", Payload: []byte(`{}`), Status: model.NotificationPending, NextAt: now, CreatedAt: now},
			}
			if err := s.ExpandNotifyEvent(ctx, model.NotifyEvent{RunID: "R1", Attempt: 1, ClaimUntil: now}, ns); err != nil {
				t.Fatal(err)
			}

			var raw []string
			for _, q := range []string{`SELECT action FROM timers`, `SELECT notify FROM timers`, `SELECT notify FROM app_notify`,
				`SELECT value FROM app_secrets`, `SELECT target FROM notifications`} {
				rows, err := s.r.Query(q)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var v string
					if err := rows.Scan(&v); err != nil {
						t.Fatal(err)
					}
					raw = append(raw, v)
				}
				rows.Close()
			}
			all := strings.Join(raw, "\n")
			for _, p := range []string{"arg-pass-1", "notify-tok-1", "app-tok-1", "app-secret-1"} {
				if strings.Contains(all, p) {
					t.Errorf("plaintext %q stored: %s", p, all)
				}
			}
			if n := strings.Count(all, SealedPrefix); n != 5 {
				t.Errorf("%d sealed values, want 5: %s", n, all)
			}
			for _, p := range []string{"u-clear", "ops@example.com"} {
				if !strings.Contains(all, p) {
					t.Errorf("non-secret %q not stored in clear: %s", p, all)
				}
			}

			got, err := s.GetTimer(ctx, "T3")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Notify, tm.Notify) || string(got.Action.Handler.Args) != `{"pw":"arg-pass-1","user":"u-clear"}` {
				t.Errorf("GetTimer: notify %+v args %s", got.Notify, got.Action.Handler.Args)
			}
			if rules, err := s.AppNotify(ctx, "a"); err != nil || !reflect.DeepEqual(rules, appRules) {
				t.Errorf("AppNotify = %+v, %v", rules, err)
			}
			secs, err := s.AppSecrets(ctx, "a")
			if err != nil || len(secs) != 1 || secs[0].Value != "app-secret-1" || !reflect.DeepEqual(secs[0].Hosts, []string{"api.test"}) ||
				len(secs[0].Commands) != 0 || !secs[0].CreatedAt.Equal(now) {
				t.Errorf("AppSecrets = %+v, %v", secs, err)
			}
			gotNs, err := s.RunNotifications(ctx, "R1")
			if err != nil || len(gotNs) != 2 {
				t.Fatalf("RunNotifications = %v, %v", gotNs, err)
			}
			for _, n := range gotNs {
				if n.Channel == model.ChannelWebhook && n.Target != "https://hooks.test/notify-tok-1" ||
					n.Channel == model.ChannelEmail && n.Target != "ops@example.com" {
					t.Errorf("notification %s target %q", n.ID, n.Target)
				}
			}

			// Replacing keeps the creation time; deleting twice is not found.
			later := now.Add(time.Hour)
			if err := s.PutAppSecret(ctx, &model.AppSecret{App: "a", Name: "API", Value: "app-secret-2", Commands: []string{"/bin/x"},
				CreatedAt: later, UpdatedAt: later}); err != nil {
				t.Fatal(err)
			}
			secs, err = s.AppSecrets(ctx, "a")
			if err != nil || len(secs) != 1 || secs[0].Value != "app-secret-2" || len(secs[0].Hosts) != 0 ||
				!secs[0].CreatedAt.Equal(now) || !secs[0].UpdatedAt.Equal(later) {
				t.Errorf("after replace: %+v, %v", secs, err)
			}
			if other, err := s.AppSecrets(ctx, "b"); err != nil || len(other) != 0 {
				t.Errorf("other app: %v, %v", other, err)
			}
			if err := s.DeleteAppSecret(ctx, "a", "API"); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteAppSecret(ctx, "a", "API"); !errors.Is(err, model.ErrNotFound) {
				t.Errorf("second delete: %v", err)
			}
			// Without the key, they do not read.
			w := openWith(t, dsn, nil)
			if _, err := w.AppNotify(ctx, "a"); !errors.Is(err, ErrSecretKey) {
				t.Errorf("AppNotify without the key: %v", err)
			}
			if _, err := w.RunNotifications(ctx, "R1"); !errors.Is(err, ErrSecretKey) {
				t.Errorf("RunNotifications without the key: %v", err)
			}
		})
	}
}
