// Backup: a consistent copy of the whole store, by VACUUM INTO on SQLite
// and by the dialect's dump tool on PostgreSQL and MySQL/MariaDB.

package sqlstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/store"
)

// BackupExt implements store.Backups.
func (s *Store) BackupExt() string {
	if s.d == dialectSQLite {
		return store.BackupSQLite
	}
	return store.BackupSQL
}

// BackupTo implements store.Backups. On SQLite, VACUUM INTO writes to f
// through /proc/self/fd, so that SQLite opens the very file f is, whatever
// happened to its path since.
func (s *Store) BackupTo(ctx context.Context, f *os.File) error {
	switch s.d {
	case dialectSQLite:
		// A read transaction: the copy is the database as of its start,
		// and writers go on meanwhile (WAL).
		target := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
		if _, err := os.Stat(target); err != nil {
			target = f.Name() // no /proc: by path
		}
		if _, err := s.r.ExecContext(ctx, `VACUUM INTO ?`, target); err != nil {
			return fmt.Errorf("backup: vacuum into %s: %w", f.Name(), err)
		}
		return nil
	case dialectPostgres:
		return s.pgDump(ctx, f)
	case dialectMySQL:
		return s.mysqlDump(ctx, f)
	}
	return fmt.Errorf("backup: no backup for dialect %s", s.d)
}

// Backup implements store.Backups.
func (s *Store) Backup(ctx context.Context, base string) (string, error) {
	final := base + s.BackupExt()
	if _, err := os.Lstat(final); err == nil {
		return final, fmt.Errorf("backup: %s exists already", final)
	}
	// The copy is written beside its final name, created 0600 first (it
	// holds the tokens' hashes and the timers' secrets), then linked to
	// its name once complete, which never replaces a file.
	partial := final + ".partial"
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return final, fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(partial)
	err = s.BackupTo(ctx, f)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("backup: %w", cerr)
	}
	if err != nil {
		return final, err
	}
	if err := os.Chmod(partial, 0o600); err != nil {
		return final, fmt.Errorf("backup: %w", err)
	}
	if err := os.Link(partial, final); err != nil {
		if errors.Is(err, os.ErrExist) {
			return final, fmt.Errorf("backup: %s exists already", final)
		}
		// A file system without hard links.
		if err := os.Rename(partial, final); err != nil {
			return final, fmt.Errorf("backup: %w", err)
		}
	}
	return final, nil
}

// lookTool returns the path of the first of names found in PATH.
func lookTool(names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("backup: %w: install %s on this node (it comes with the database's client package)",
		store.ErrBackupTool, strings.Join(names, " or "))
}

// runTool runs a dump tool, its stderr in the error.
func runTool(ctx context.Context, cmd *exec.Cmd) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("backup: %s: %w", cmd.Args[0], ctx.Err())
		}
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return fmt.Errorf("backup: %s: %v: %s", cmd.Args[0], err, msg)
	}
	return nil
}

// pgxOnly are query parameters of a postgres DSN that pgx takes and libpq
// (pg_dump) refuses.
func pgxOnly(k string) bool {
	return strings.HasPrefix(k, "pool_") || strings.HasPrefix(k, "statement_cache") ||
		strings.HasPrefix(k, "description_cache") || k == "default_query_exec_mode"
}

// pgDump runs pg_dump into f: a plain SQL script, from one snapshot,
// without ownership statements (it restores as whichever role runs it).
// The password goes through PGPASSWORD, not the command line.
func (s *Store) pgDump(ctx context.Context, f *os.File) error {
	tool, err := lookTool("pg_dump")
	if err != nil {
		return err
	}
	u, err := url.Parse(s.dsn)
	if err != nil {
		return fmt.Errorf("backup: dsn: %w", err)
	}
	env := model.WithoutNodeSecrets(os.Environ())
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			env = append(env, "PGPASSWORD="+pw)
		}
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	for k := range q {
		if pgxOnly(k) {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	u.Scheme = "postgresql"
	cmd := exec.CommandContext(ctx, tool, "--no-password", "--format=plain", "--no-owner", "--dbname="+u.String())
	cmd.Env = env
	cmd.Stdout = f
	return runTool(ctx, cmd)
}

// mysqlDump runs mariadb-dump or mysqldump into f with
// --single-transaction: one consistent snapshot of the InnoDB tables, no
// table locks. The credentials go in a 0600 option file, removed after.
func (s *Store) mysqlDump(ctx context.Context, out *os.File) error {
	tool, err := lookTool("mariadb-dump", "mysqldump")
	if err != nil {
		return err
	}
	u, err := url.Parse(s.dsn)
	if err != nil {
		return fmt.Errorf("backup: dsn: %w", err)
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	opt := "[client]\nprotocol=TCP\nhost=" + optValue(u.Hostname()) + "\nport=" + port + "\n"
	if u.User != nil {
		opt += "user=" + optValue(u.User.Username()) + "\n"
		if pw, ok := u.User.Password(); ok {
			opt += "password=" + optValue(pw) + "\n"
		}
	}
	f, err := os.CreateTemp("", "chime-dump-*.cnf")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(opt)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	cmd := exec.CommandContext(ctx, tool, "--defaults-extra-file="+f.Name(), "--single-transaction",
		"--no-tablespaces", db)
	cmd.Env = model.WithoutNodeSecrets(os.Environ())
	cmd.Stdout = out
	return runTool(ctx, cmd)
}

// optValue quotes v for a MySQL option file.
func optValue(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(v) + `"`
}
