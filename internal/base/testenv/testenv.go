// Package testenv gives tests the addresses of the real servers that
// scripts/test.sh starts (Redis, MariaDB, PostgreSQL). A test that needs a
// server calls RedisURL, MySQLDSN or PostgresDSN: when the variable is unset
// the test is skipped, unless CHIME_TEST_REQUIRE_SERVERS=1 (set by
// scripts/test.sh and so by CI), where a missing server fails the test.
//
// The servers are shared, so a test that writes to one takes something of
// its own from the helpers of db.go: MySQLDatabase and PostgresDatabase
// (a fresh database, dropped at the end), RedisDB (an empty Redis DB
// number, for a node) and RedisPrefix (a key prefix, for the index and the
// locks). Call (http.go) is the request helper of the API tests.
package testenv

import (
	"os"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/servers"
)

// Environment variables set by scripts/services.sh.
const (
	EnvRedis    = "CHIME_TEST_REDIS_URL"    // redis://127.0.0.1:port/0
	EnvMySQL    = "CHIME_TEST_MYSQL_DSN"    // mysql://root@127.0.0.1:port/ (no database)
	EnvPostgres = "CHIME_TEST_POSTGRES_DSN" // postgres://postgres@127.0.0.1:port/postgres?sslmode=disable
	EnvRequire  = servers.EnvRequire
)

// Eventually checks cond until it reports true, and fails the test if it
// has not within timeout (servers.Eventually).
func Eventually(t testing.TB, timeout time.Duration, desc string, cond func() (bool, string)) {
	t.Helper()
	servers.Eventually(t, timeout, desc, cond)
}

// Poll checks cond until it reports true or timeout passes (servers.Poll).
func Poll(timeout time.Duration, cond func() (bool, string)) (bool, string) {
	return servers.Poll(timeout, cond)
}

func get(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s is not set but %s=1: start the servers with scripts/test.sh", name, EnvRequire)
		}
		t.Skipf("%s not set; run scripts/test.sh to test against a real server", name)
	}
	return v
}

// RedisURL returns the test Redis URL or skips the test.
func RedisURL(t testing.TB) string { return get(t, EnvRedis) }

// MySQLDSN returns the test MariaDB/MySQL URL (without a database) or skips.
func MySQLDSN(t testing.TB) string { return get(t, EnvMySQL) }

// PostgresDSN returns the test PostgreSQL URL or skips.
func PostgresDSN(t testing.TB) string { return get(t, EnvPostgres) }
