package servers

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// PostgresPair is a PostgreSQL primary with a streaming standby, each a
// server of the test's own (Debian's postgresql package, which
// scripts/services.sh installs) on a free loopback port, run as the
// postgres user when the test runs as root. Replication is synchronous
// (the primary's commits wait for the standby's flush) or asynchronous.
type PostgresPair struct {
	Primary, Standby *PostgresProc
}

// PostgresProc is one PostgreSQL server of a PostgresPair.
type PostgresProc struct {
	Port int
	Dir  string
	cmd  *exec.Cmd
}

// DSN is the pair's chime DSN for database db: both hosts, the one that
// takes writes chosen at each connection (target_session_attrs).
func (p *PostgresPair) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		p.Primary.Port, p.Standby.Port, db)
}

// Kill sends SIGKILL to the server's postmaster and waits for it to exit.
// Its backends exit when they find the postmaster gone.
func (p *PostgresProc) Kill() {
	kill(p.cmd)
}

// Promote makes the standby a primary and waits until it takes writes.
func (p *PostgresPair) Promote(t TB) {
	t.Helper()
	db := openPG(t, p.Standby.Port, "postgres")
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ok bool
	if err := db.QueryRowContext(ctx, `SELECT pg_promote(true, 60)`).Scan(&ok); err != nil || !ok {
		t.Fatalf("promote the standby: %v (%v)", err, ok)
	}
}

// PostgresReplicated starts a PostgresPair with a database named db (made
// on the primary before the standby is copied from it) and waits until the
// standby streams (and, with sync, is the synchronous one).
func PostgresReplicated(t TB, db string, sync bool) *PostgresPair {
	t.Helper()
	bin := pgBin(t)
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PostgreSQL refuses to run as root and there is no postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// t.TempDir's directories are the test user's alone; the servers run
	// as postgres.
	root, err := os.MkdirTemp("", "chime-pgha-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	p := &PostgresPair{
		Primary: &PostgresProc{Port: freePort(t, false), Dir: filepath.Join(root, "primary")},
		Standby: &PostgresProc{Port: freePort(t, false), Dir: filepath.Join(root, "standby")},
	}
	run("initdb", "-D", p.Primary.Dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	settings := []string{"-c", "wal_level=replica", "-c", "max_wal_senders=5", "-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "wal_keep_size=256MB"}
	startPG(t, bin, cred, p.Primary, root, settings)
	pdb := openPG(t, p.Primary.Port, "postgres")
	if _, err := pdb.Exec("CREATE DATABASE " + db); err != nil {
		t.Fatal(err)
	}
	run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Primary.Port), "-U", "postgres", "-D", p.Standby.Dir, "-X", "stream", "--no-sync")
	conf := fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=standby1'\n", p.Primary.Port)
	if err := os.WriteFile(filepath.Join(p.Standby.Dir, "postgresql.auto.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.Standby.Dir, "standby.signal"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		for _, f := range []string{"postgresql.auto.conf", "standby.signal"} {
			_ = os.Chown(filepath.Join(p.Standby.Dir, f), int(cred.Uid), int(cred.Gid))
		}
	}
	startPG(t, bin, cred, p.Standby, root, settings)
	want := "async"
	if sync {
		// Only now: with a synchronous standby named, the primary's
		// commits wait for it, the CREATE DATABASE above included.
		want = "sync"
		if _, err := pdb.Exec(`ALTER SYSTEM SET synchronous_standby_names = 'standby1'`); err != nil {
			t.Fatal(err)
		}
		if _, err := pdb.Exec(`SELECT pg_reload_conf()`); err != nil {
			t.Fatal(err)
		}
	}
	Eventually(t, 30*time.Second, "the standby to stream from the primary", func() (bool, string) {
		var state string
		err := pdb.QueryRow(`SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1' AND state = 'streaming'`).Scan(&state)
		if err != nil {
			return false, err.Error()
		}
		return state == want, state
	})
	pdb.Close()
	return p
}

// startPG starts the server of p's data dir as cred and waits until it
// answers; it is killed when t ends.
func startPG(t TB, bin string, cred *syscall.Credential, p *PostgresProc, root string, settings []string) {
	t.Helper()
	args := append([]string{"-D", p.Dir, "-p", strconv.Itoa(p.Port), "-h", "127.0.0.1", "-k", root}, settings...)
	p.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	startLogged(t, p.cmd, p.Dir+".log", "postgres")
	Eventually(t, 60*time.Second, "postgres on port "+strconv.Itoa(p.Port)+" to answer", func() (bool, string) {
		db := openPG(t, p.Port, "postgres")
		defer db.Close()
		err := db.Ping()
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

func openPG(t TB, port int, db string) *sql.DB {
	t.Helper()
	d, err := sql.Open("pgx", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=2", port, db))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// pgBin returns the directory of the PostgreSQL server binaries, or skips
// t without them.
func pgBin(t TB) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "postgres")); err == nil {
			return dirs[i]
		}
	}
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("PostgreSQL server binaries not found but %s=1: install Debian's postgresql", EnvRequire)
	}
	t.Skip("PostgreSQL server binaries not installed")
	return ""
}
