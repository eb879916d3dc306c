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

	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// BackupIn implements store.Backups. The copy is written beside its final
// name, created 0600 first (it holds the tokens' hashes and the timers'
// secrets), then linked to its name once complete, which never replaces a
// file: each step through root. SQLite's VACUUM INTO writes to the open
// file through /proc/self/fd (or /dev/fd), so that it opens the very file
// created in root; the dump tools write to their standard output, that
// file.
func (s *core) BackupIn(ctx context.Context, root *os.Root, base string) (string, error) {
	final := base + s.d.backupExt()
	if _, err := root.Lstat(final); err == nil {
		return final, fmt.Errorf("backup: %s exists already", final)
	}
	partial := final + ".partial"
	f, err := root.OpenFile(partial, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return final, fmt.Errorf("backup: %w", err)
	}
	defer root.Remove(partial)
	err = s.backupTo(ctx, f)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("backup: %w", cerr)
	}
	if err != nil {
		return final, err
	}
	if err := root.Link(partial, final); err != nil {
		if errors.Is(err, os.ErrExist) {
			return final, fmt.Errorf("backup: %s exists already", final)
		}
		// A file system without hard links.
		if err := root.Rename(partial, final); err != nil {
			return final, fmt.Errorf("backup: %w", err)
		}
	}
	return final, nil
}

// backupExt is the extension of the store's backups.
func (d dialect) backupExt() string {
	if d == dialectSQLite {
		return store.BackupSQLite
	}
	return store.BackupSQL
}

// backupTo writes the copy into f, an empty file open for reading and
// writing.
func (s *core) backupTo(ctx context.Context, f *os.File) error {
	switch s.d {
	case dialectSQLite:
		target := ""
		for _, dir := range []string{"/proc/self/fd/", "/dev/fd/"} {
			if _, err := os.Stat(dir + strconv.Itoa(int(f.Fd()))); err == nil {
				target = dir + strconv.Itoa(int(f.Fd()))
				break
			}
		}
		if target == "" {
			return errors.New("backup: SQLite backups need /proc/self/fd or /dev/fd")
		}
		// A read transaction: the copy is the database as of its start,
		// and writers go on meanwhile (WAL).
		if _, err := s.r.ExecContext(ctx, `VACUUM INTO ?`, target); err != nil {
			return fmt.Errorf("backup: vacuum into %s: %w", f.Name(), err)
		}
		return nil
	case dialectPostgres:
		return pgDump(ctx, s.dsn, f)
	case dialectMySQL:
		return mysqlDump(ctx, s.dsn, f)
	}
	return fmt.Errorf("backup: no backup for dialect %s", s.d)
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
func pgDump(ctx context.Context, dsn string, f *os.File) error {
	tool, err := lookTool("pg_dump")
	if err != nil {
		return err
	}
	u, err := url.Parse(dsn)
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
func mysqlDump(ctx context.Context, dsn string, out *os.File) error {
	tool, err := lookTool("mariadb-dump", "mysqldump")
	if err != nil {
		return err
	}
	u, err := url.Parse(dsn)
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
