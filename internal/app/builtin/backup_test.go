package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/internal/store/storetest"
	"github.com/chimehq/chime/model"
)

func openStore(t *testing.T, dsn string) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), dsn, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func backupArgs(dir string, keep int) string {
	b, _ := json.Marshal(map[string]any{"dir": dir, "keep": keep})
	return string(b)
}

func runBackup(t *testing.T, b *BackupDatabase, args string) BackupResult {
	t.Helper()
	out, err := b.Run(context.Background(), runWith(args))
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	var res BackupResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	return res
}

func TestBackupValidate(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	outside := t.TempDir()
	b := &BackupDatabase{Roots: []string{root}}
	bad := map[string]string{
		`{"keep": 3}`:                           "dir is required",
		`{"dir": "backups", "keep": 3}`:         "must be an absolute path",
		`{"dir": "/", "keep": 3}`:               `dir "/" is refused`,
		`{"dir": "/tmp/../etc", "keep": 3}`:     "must not contain . or ..",
		backupArgs(root, 0):                     "keep must be at least 1, not 0",
		backupArgs(root, -2):                    "keep must be at least 1, not -2",
		`{"dir": "` + root + `", "kept": 3}`:    "unknown field",
		`{"dir": "` + root + `", "keep": "3"}`:  "keep",
		backupArgs(outside, 3):                  "is not inside a --output-root",
		backupArgs(filepath.Join(root, "x"), 3): "does not resolve",
		``:                                      "args are required",
	}
	for args, want := range bad {
		if err := b.ValidateArgs(json.RawMessage(args)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", args, err, want)
		}
	}
	for _, good := range []string{backupArgs(root, 1), `{"dir": "` + root + `"}`} {
		if err := b.ValidateArgs(json.RawMessage(good)); err != nil {
			t.Errorf("%s: %v", good, err)
		}
	}
	if err := (&BackupDatabase{}).ValidateArgs(json.RawMessage(backupArgs(root, 1))); err == nil || !strings.Contains(err.Error(), "no --output-root") {
		t.Errorf("no roots: %v", err)
	}
}

// TestBackupDirSwapped: a dir inside the root at creation that resolves
// outside it at the run (a link swapped in) fails the run, which writes
// nothing outside.
func TestBackupDirSwapped(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "backups")
	os.Mkdir(dir, 0o700)
	b := &BackupDatabase{Store: openStore(t, "sqlite::memory:"), Roots: []string{root}}
	if err := b.ValidateArgs(json.RawMessage(backupArgs(dir, 2))); err != nil {
		t.Fatal(err)
	}
	os.Remove(dir)
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Run(context.Background(), runWith(backupArgs(dir, 2))); err == nil || !strings.Contains(err.Error(), "not inside a --output-root") {
		t.Fatalf("run: %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("written outside: %v", entries)
	}
}

// TestBackupSQLiteReadBack: the backup of a SQLite store is a database file
// that opens as a store and holds the timers as of the backup, not the
// changes made after it.
func TestBackupSQLiteReadBack(t *testing.T) {
	t.Parallel()
	s := openStore(t, "sqlite://"+filepath.Join(t.TempDir(), "chime.db"))
	ctx := context.Background()
	a, b := storetest.NewTimer("ops", "nightly"), storetest.NewTimer("billing", "invoices")
	for _, tm := range []*model.Timer{a, b} {
		if _, err := s.SaveTimer(ctx, store.TimerWrite{Timer: tm, Create: true}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	h := &BackupDatabase{Store: s, Roots: []string{dir}, Now: func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC) }}
	res := runBackup(t, h, backupArgs(dir, 3))
	if want := filepath.Join(dir, "chime-20300102T030405.006Z.db"); res.File != want {
		t.Fatalf("file %q, want %q", res.File, want)
	}
	fi, err := os.Stat(res.File)
	if err != nil || fi.Size() != res.SizeBytes || fi.Size() == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup %+v: stat %v, %v", res, fi, err)
	}
	if res.DurationMS < 0 || len(res.Removed) != 0 {
		t.Fatalf("result %+v", res)
	}
	// A change after the backup is not in it.
	if err := s.DeleteTimer(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	copyStore := openStore(t, "sqlite://"+res.File)
	timers, _, err := copyStore.ListTimers(ctx, store.TimerFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tm := range timers {
		names = append(names, tm.App+"/"+tm.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"billing/invoices", "ops/nightly"}) {
		t.Fatalf("timers in the backup: %v", names)
	}
}

// TestBackupKeep: each run adds a backup and removes the oldest beyond
// keep, and never a file that is not a backup.
func TestBackupKeep(t *testing.T) {
	t.Parallel()
	s := openStore(t, "sqlite::memory:")
	dir := t.TempDir()
	others := []string{"notes.txt", "chime-manual.db", "chime-20200101T000000.000Z.db.partial"}
	for _, name := range others {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600)
	}
	os.Mkdir(filepath.Join(dir, "chime-20000101T000000.000Z.db"), 0o700) // a directory with a backup's name
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	h := &BackupDatabase{Store: s, Roots: []string{dir}, Now: func() time.Time { at = at.Add(time.Second); return at }}
	var files []string
	for i := range 5 {
		res := runBackup(t, h, backupArgs(dir, 3))
		files = append(files, res.File)
		var wantRemoved []string
		if i >= 3 {
			wantRemoved = []string{files[i-3]}
		}
		if !slices.Equal(res.Removed, wantRemoved) && !(len(res.Removed) == 0 && len(wantRemoved) == 0) {
			t.Errorf("run %d removed %v, want %v", i, res.Removed, wantRemoved)
		}
	}
	entries, _ := os.ReadDir(dir)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := append([]string{"chime-20000101T000000.000Z.db"}, others...)
	for _, f := range files[2:] {
		want = append(want, filepath.Base(f))
	}
	slices.Sort(want)
	slices.Sort(left)
	if !slices.Equal(left, want) {
		t.Fatalf("left in dir:\n %v\nwant\n %v", left, want)
	}
}

// TestBackupServers: on MariaDB and PostgreSQL, with mysqldump/mariadb-dump
// and pg_dump installed (they come with the server packages), the backup
// is a dump script with the timers table and its rows, which the client
// (mariadb, psql) restores into an empty database that opens as a store.
func TestBackupServers(t *testing.T) {
	t.Parallel()
	for _, be := range []struct {
		name           string
		dsn            func(testing.TB) string
		tools, clients []string
	}{
		{"mariadb", testenv.MySQLDatabase, []string{"mariadb-dump", "mysqldump"}, []string{"mariadb", "mysql"}},
		{"postgres", testenv.PostgresDatabase, []string{"pg_dump"}, []string{"psql"}},
	} {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			found := slices.ContainsFunc(be.tools, func(n string) bool { _, err := exec.LookPath(n); return err == nil })
			if !found {
				t.Skipf("%s not installed on this host", strings.Join(be.tools, " or "))
			}
			s := openStore(t, be.dsn(t))
			tm := storetest.NewTimer("ops", "dumped")
			if _, err := s.SaveTimer(context.Background(), store.TimerWrite{Timer: tm, Create: true}); err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			res := runBackup(t, &BackupDatabase{Store: s, Roots: []string{dir}}, backupArgs(dir, 2))
			if !strings.HasSuffix(res.File, ".sql") || res.SizeBytes == 0 {
				t.Fatalf("result %+v", res)
			}
			b, err := os.ReadFile(res.File)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"CREATE TABLE", "timers", tm.ID, "dumped"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("dump lacks %q", want)
				}
			}

			// Restored into an empty database with the client, as
			// docs/workflows.md says, it opens as a store with the timer.
			target := be.dsn(t)
			u, err := url.Parse(target)
			if err != nil {
				t.Fatal(err)
			}
			client := ""
			for _, name := range be.clients {
				if _, err := exec.LookPath(name); err == nil {
					client = name
					break
				}
			}
			if client == "" {
				t.Skipf("%s not installed on this host: the restore is not tested", strings.Join(be.clients, " or "))
			}
			var cmd *exec.Cmd
			if be.name == "postgres" {
				u.Scheme = "postgresql"
				cmd = exec.Command(client, "--quiet", "--set=ON_ERROR_STOP=1", "--file="+res.File, u.String())
			} else {
				cmd = exec.Command(client, "--protocol=TCP", "-h", u.Hostname(), "-P", u.Port(), "-u", u.User.Username(), strings.TrimPrefix(u.Path, "/"))
				f, err := os.Open(res.File)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cmd.Stdin = f
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("restore with %s: %v: %s", client, err, out)
			}
			restored := openStore(t, target)
			got, err := restored.GetTimerByName(context.Background(), "ops", "dumped")
			if err != nil || got.ID != tm.ID {
				t.Fatalf("restored timer: %v, %v", got, err)
			}
		})
	}
}

// TestBackupToolMissing: without the dump tool in PATH the run fails
// saying which tool to install, and leaves no file.
func TestBackupToolMissing(t *testing.T) {
	s := openStore(t, testenv.PostgresDatabase(t))
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	_, err := (&BackupDatabase{Store: s, Roots: []string{dir}}).Run(context.Background(), runWith(backupArgs(dir, 2)))
	if !errors.Is(err, store.ErrBackupTool) || !strings.Contains(err.Error(), "install pg_dump") {
		t.Fatalf("err %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left %v", entries)
	}
}
