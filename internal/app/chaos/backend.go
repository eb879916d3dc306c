package chaos

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx", for freshPostgres
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // driver "sqlite", for holdSQLiteWriteLock

	"github.com/chimehq/chime/internal/base/clock"
)

// freshName returns a new database name for one run.
func freshName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "chime_chaos_" + hex.EncodeToString(b[:])
}

// freshMySQL creates a database on the server of dsn and returns its DSN
// and a function that drops it.
func freshMySQL(ctx context.Context, dsn string) (string, func(), error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "mysql" && u.Scheme != "mariadb") {
		return "", nil, fmt.Errorf("chaos: --db %q: want mysql://user:pass@host:port/", redact(dsn))
	}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Net, cfg.Addr = "tcp", u.Host
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", nil, fmt.Errorf("chaos: open MySQL %s: %w", cfg.Addr, err)
	}
	name := freshName()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("chaos: create database %s on %s: %w", name, cfg.Addr, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
		db.Close()
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// freshPostgres creates a database on the server of dsn
// (postgres://user:pass@host:port/db?params, db being one to connect to)
// and returns the DSN of the new one, with the same parameters, and a
// function that drops it.
func freshPostgres(ctx context.Context, dsn string) (string, func(), error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("chaos: --db %q: want postgres://user:pass@host:port/db?sslmode=disable", redact(dsn))
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/postgres"
	}
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		return "", nil, fmt.Errorf("chaos: open PostgreSQL %s: %w", u.Host, err)
	}
	name := freshName()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name+" ENCODING 'UTF8'"); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("chaos: create database %s on %s: %w", name, u.Host, err)
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE (PostgreSQL 13+) ends the sessions a killed node left.
		_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		db.Close()
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// flushRedis empties the Redis DB of rawURL.
func flushRedis(ctx context.Context, rawURL string) error {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return fmt.Errorf("chaos: --redis %q: %w", rawURL, err)
	}
	cl := redis.NewClient(opt)
	defer cl.Close()
	if err := cl.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("chaos: flush Redis DB %d: %w", opt.DB, err)
	}
	return nil
}

// sqliteStallBusyTimeout is how long the stall waits for its turn at the
// SQLite write lock (the nodes hold it for milliseconds at a time).
const sqliteStallBusyTimeout = 30 * time.Second

// holdSQLiteWriteLock opens the SQLite file at path in this process, takes
// its write lock (BEGIN IMMEDIATE, waiting up to sqliteStallBusyTimeout for
// its turn), calls acquired, holds the lock for d (or until ctx is done),
// and rolls back. The nodes' writes wait for it meanwhile (and fail after
// their own busy timeout); their reads go on (WAL).
func holdSQLiteWriteLock(ctx context.Context, path string, d time.Duration, acquired func()) error {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteStallBusyTimeout.Milliseconds()))
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("stall: open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	// Not ctx: a cancelled ctx would roll back at once, which is fine, but
	// the Begin itself must not be abandoned half-way.
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("stall: BEGIN IMMEDIATE on %s: %w", path, err)
	}
	acquired()
	_ = clock.Sleep(ctx, nil, d)
	if err := tx.Rollback(); err != nil {
		return fmt.Errorf("stall: roll back on %s: %w", path, err)
	}
	return nil
}

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	return u.Redacted()
}
