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
)

// Environment variables set by scripts/services.sh.
const (
	EnvRedis    = "CHIME_TEST_REDIS_URL"    // redis://127.0.0.1:port/0
	EnvMySQL    = "CHIME_TEST_MYSQL_DSN"    // mysql://root@127.0.0.1:port/ (no database)
	EnvPostgres = "CHIME_TEST_POSTGRES_DSN" // postgres://postgres@127.0.0.1:port/postgres?sslmode=disable
	EnvRequire  = "CHIME_TEST_REQUIRE_SERVERS"
)

// TB is what the server starters of pgha.go and redisha.go, and
// Eventually, need of a test: testing.TB has it, and so has a harness
// outside a test (the chaos tool's, which starts the same deployments for
// its failover faults).
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	Cleanup(func())
	TempDir() string
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
