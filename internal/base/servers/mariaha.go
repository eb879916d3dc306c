package servers

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	_ "github.com/go-sql-driver/mysql" // driver "mysql", for openMaria
)

// MariaDBBehindProxy is a MariaDB primary with an asynchronous replica
// (GTID replication), each a server of the test's own (Debian's
// mariadb-server, which scripts/services.sh installs), behind an HAProxy
// (Debian's haproxy) that sends every connection to the primary while it
// answers and to the replica once it does not: the replica is a backup
// server, and a stick table keeps the connections on the server they
// moved to, so a primary that comes back is not written to again. The
// proxy checks each server every 500 ms, takes it out after two failures
// and closes the sessions it held.
type MariaDBBehindProxy struct {
	Primary, Replica *MariaDBProc
	ProxyPort        int
}

// MariaDBProc is one mariadbd of a MariaDBBehindProxy.
type MariaDBProc struct {
	Port int
	cmd  *exec.Cmd
}

// Kill sends SIGKILL to the server and waits for it to exit.
func (p *MariaDBProc) Kill() {
	kill(p.cmd)
}

// DSN is chime's DSN for database db through the proxy.
func (m *MariaDBBehindProxy) DSN(db string) string {
	return fmt.Sprintf("mysql://root@127.0.0.1:%d/%s", m.ProxyPort, db)
}

// Promote makes the replica a primary: it stops replicating and takes
// writes.
func (m *MariaDBBehindProxy) Promote(t TB) {
	t.Helper()
	db := openMaria(t, m.Replica.Port, "")
	defer db.Close()
	for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("promote the replica: %s: %v", q, err)
		}
	}
}

// MariaDBReplicated starts a MariaDBBehindProxy with a database named db,
// made on the primary once the replica replicates, and waits until the
// replica has it.
func MariaDBReplicated(t TB, db string) *MariaDBBehindProxy {
	t.Helper()
	mysqld, err := exec.LookPath("mariadbd")
	if err != nil {
		mysqld = "/usr/sbin/mariadbd"
	}
	haproxy, herr := exec.LookPath("haproxy")
	if _, err := os.Stat(mysqld); err != nil || herr != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("mariadbd or haproxy not found but %s=1: install Debian's mariadb-server and haproxy", EnvRequire)
		}
		t.Skip("mariadbd or haproxy not installed")
	}
	root := t.TempDir()
	m := &MariaDBBehindProxy{
		Primary: startMaria(t, mysqld, root, "primary", 1),
		Replica: startMaria(t, mysqld, root, "replica", 2),
	}
	r := openMaria(t, m.Replica.Port, "")
	defer r.Close()
	for _, q := range []string{
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos", m.Primary.Port),
		"START SLAVE",
	} {
		if _, err := r.Exec(q); err != nil {
			t.Fatalf("replica: %s: %v", q, err)
		}
	}
	p := openMaria(t, m.Primary.Port, "")
	defer p.Close()
	if _, err := p.Exec("CREATE DATABASE " + db + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "the replica to have database "+db, func() (bool, string) {
		var n int
		if err := r.QueryRow(`SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?`, db).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n == 1, "not yet"
	})

	m.ProxyPort = freePort(t, false)
	conf := filepath.Join(root, "haproxy.cfg")
	body := fmt.Sprintf(`global
	maxconn 4000
defaults
	mode tcp
	timeout connect 2s
	timeout client 1h
	timeout server 1h
listen mariadb
	bind 127.0.0.1:%d
	stick-table type ip size 1 nopurge
	stick on dst
	default-server inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions
	server primary 127.0.0.1:%d check
	server replica 127.0.0.1:%d check backup
`, m.ProxyPort, m.Primary.Port, m.Replica.Port)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	startLogged(t, exec.Command(haproxy, "-db", "-f", conf), filepath.Join(root, "haproxy.log"), "haproxy")
	Eventually(t, 30*time.Second, "the primary through haproxy", func() (bool, string) {
		d := openMaria(t, m.ProxyPort, "")
		defer d.Close()
		var id int
		if err := d.QueryRow(`SELECT @@server_id`).Scan(&id); err != nil {
			return false, err.Error()
		}
		return id == 1, fmt.Sprint("server_id ", id)
	})
	return m
}

// startMaria initialises a data dir and starts mariadbd with server id id
// (binary log on, GTID replication), waits until it answers on TCP, and
// kills it when t ends. root@127.0.0.1 has no password.
func startMaria(t TB, mysqld, root, name string, id int) *MariaDBProc {
	t.Helper()
	dir := filepath.Join(root, name)
	sock := filepath.Join(root, name+".sock")
	user := []string{}
	if os.Getuid() == 0 {
		user = []string{"--user=root"}
	}
	install := exec.Command("mariadb-install-db", append(user, "--datadir="+dir, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve")...)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db %s: %v\n%s", name, err, out)
	}
	p := &MariaDBProc{Port: freePort(t, false)}
	args := append([]string{"--no-defaults"}, user...)
	args = append(args, "--datadir="+dir, "--socket="+sock, "--port="+strconv.Itoa(p.Port), "--bind-address=127.0.0.1",
		"--skip-name-resolve", "--pid-file="+dir+".pid", "--server-id="+strconv.Itoa(id), "--log-bin=mariadb-bin",
		"--binlog-format=ROW", "--innodb-flush-log-at-trx-commit=0", "--sync-binlog=0", "--innodb-buffer-pool-size=128M",
		"--max-connections=500")
	p.cmd = exec.Command(mysqld, args...)
	startLogged(t, p.cmd, dir+".log", "mariadbd "+name)
	// root over TCP from 127.0.0.1, passwordless, made on each server
	// alone (not written to the binary log, so not replicated).
	Eventually(t, 60*time.Second, "mariadbd "+name+" to answer", func() (bool, string) {
		out, err := exec.Command("mariadb", "--no-defaults", "-uroot", "--socket="+sock, "-e",
			"SET sql_log_bin = 0; CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; "+
				"GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;").CombinedOutput()
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		return true, ""
	})
	return p
}

func openMaria(t TB, port int, db string) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s?timeout=2s&readTimeout=5s", port, db))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
