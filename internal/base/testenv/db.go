package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx", for PostgresDatabase
	"github.com/redis/go-redis/v9"
)

// The test servers are shared (by parallel tests, packages and other
// checkouts): every helper below makes something of the test's own — a
// database, a Redis DB number, a key prefix — and removes it when the test
// ends. None of them touches what it did not make.

// randomName returns prefix followed by 12 random hex digits.
func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// MySQLDatabase creates a database of its own (utf8mb4, binary collation)
// on the test MariaDB, drops it when t ends, and returns its chime DSN,
// mysql://…/name. It skips t like MySQLDSN when no server is configured.
func MySQLDatabase(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(MySQLDSN(t))
	if err != nil {
		t.Fatalf("parse %s: %v", EnvMySQL, err)
	}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Net, cfg.Addr = "tcp", u.Host
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("open MariaDB %s: %v", u.Host, err)
	}
	name := randomName("chime_test_")
	createDatabase(t, db, name, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
		"DROP DATABASE IF EXISTS "+name)
	u.Path = "/" + name
	return u.String()
}

// PostgresDatabase creates a database of its own on the test PostgreSQL,
// drops it when t ends (ending the sessions left on it), and returns its
// DSN with the server's parameters. It skips t like PostgresDSN when no
// server is configured.
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	base := PostgresDSN(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvPostgres, err)
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open PostgreSQL %s: %v", u.Host, err)
	}
	name := randomName("chime_test_")
	createDatabase(t, db, name, "CREATE DATABASE "+name, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	u.Path = "/" + name
	return u.String()
}

// createDatabase runs create on db and registers drop, and closing db, as
// t's cleanup.
func createDatabase(t testing.TB, db *sql.DB, name, create, drop string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.ExecContext(ctx, create); err != nil {
		db.Close()
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := db.ExecContext(ctx, drop); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		db.Close()
	})
}

// redisClaimKey marks a Redis DB as taken by a test.
const redisClaimKey = "chime-test-claim"

// RedisDB takes an empty Redis DB among 1..15 for t (chime's keys have a
// fixed prefix, so a node under test needs a DB of its own), empties it
// when t ends, and returns its URL. The DB holds one key of the helper's
// while t runs, so that a concurrent test does not take it too. It skips t
// like RedisURL when no server is configured.
func RedisDB(t testing.TB) string {
	t.Helper()
	base := RedisURL(t)
	opt, err := redis.ParseURL(base)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvRedis, err)
	}
	ctx := context.Background()
	for _, n := range mrand.Perm(15) {
		o := *opt
		o.DB = n + 1
		c := redis.NewClient(&o)
		ok, err := c.SetNX(ctx, redisClaimKey, t.Name(), 0).Result()
		if err != nil {
			c.Close()
			t.Fatalf("redis SETNX on db %d: %v", o.DB, err)
		}
		if !ok {
			c.Close()
			continue // another test's
		}
		if size, err := c.DBSize(ctx).Result(); err != nil || size != 1 {
			// Someone else's keys (a test that does not claim): leave them.
			c.Del(ctx, redisClaimKey)
			c.Close()
			if err != nil {
				t.Fatalf("redis DBSIZE on db %d: %v", o.DB, err)
			}
			continue
		}
		t.Cleanup(func() {
			if err := c.FlushDB(context.Background()).Err(); err != nil {
				t.Errorf("redis FLUSHDB %d: %v", o.DB, err)
			}
			c.Close()
		})
		u, err := url.Parse(base)
		if err != nil {
			t.Fatalf("parse %s: %v", EnvRedis, err)
		}
		u.Path = fmt.Sprintf("/%d", o.DB)
		return u.String()
	}
	t.Fatalf("no empty Redis DB among 1..15 on %s", base)
	return ""
}

// RedisPrefix connects to the test Redis and returns the client and a key
// prefix unique to t; the keys under prefix+":" are deleted, and the client
// closed, when t ends. It is for the parts whose keys take a prefix (the
// index, the locks); a node needs RedisDB. It skips t like RedisURL when no
// server is configured.
func RedisPrefix(t testing.TB) (*redis.Client, string) {
	t.Helper()
	opt, err := redis.ParseURL(RedisURL(t))
	if err != nil {
		t.Fatalf("parse %s: %v", EnvRedis, err)
	}
	c := redis.NewClient(opt)
	prefix := randomName("chimetest-")
	t.Cleanup(func() {
		if _, err := DeleteRedisKeys(c, prefix+":*"); err != nil {
			t.Errorf("clean up %s: %v", prefix, err)
		}
		c.Close()
	})
	return c, prefix
}

// DeleteRedisKeys deletes the keys of c matching the SCAN pattern and
// returns how many it deleted.
func DeleteRedisKeys(c redis.UniversalClient, pattern string) (int, error) {
	ctx := context.Background()
	n := 0
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		if err := c.Del(ctx, iter.Val()).Err(); err != nil {
			return n, fmt.Errorf("del %s: %w", iter.Val(), err)
		}
		n++
	}
	if err := iter.Err(); err != nil {
		return n, fmt.Errorf("scan %s: %w", pattern, err)
	}
	return n, nil
}
