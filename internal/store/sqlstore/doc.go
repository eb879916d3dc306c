// Package sqlstore implements store.Store over database/sql for SQLite
// (modernc.org/sqlite, pure Go), MySQL/MariaDB (go-sql-driver/mysql) and
// PostgreSQL (pgx through its database/sql driver).
//
// Open takes a URL-like DSN that selects the dialect:
//
//	sqlite:///abs/path/chime.db      absolute path
//	sqlite://./rel/path/chime.db     path relative to the working directory
//	sqlite:rel/path/chime.db         same
//	sqlite::memory:                  a private in-memory database (tests)
//	mysql://user:pass@host:3306/db?param=value
//	postgres://user:pass@host:5432/db?sslmode=disable   (or postgresql://)
//
// Query parameters of a sqlite DSN are passed to the driver (for example
// _pragma=cache_size(-16000)); those of a mysql DSN are go-sql-driver/mysql
// parameters; a postgres DSN is handed to pgx as is.
//
// Open applies the embedded schema migrations (migrations/<dialect>/NNNN_*.sql,
// recorded in table schema_migrations) under a lock, so that several
// processes may start at once: GET_LOCK on MySQL, pg_advisory_lock on
// PostgreSQL, an immediate transaction on SQLite.
//
// SQLite runs in WAL mode with a 5 s busy timeout and, by default,
// synchronous=FULL (Options.Synchronous): every commit — each claim and each
// batch of results — is synced to the WAL file before it returns, so that
// neither a crash of the process nor a power loss or an OS crash takes back a
// claim or a result that chime acted on. With "normal" the WAL is synced only
// at checkpoints: commits are cheaper, a crash of the process still loses
// nothing, but a power loss or an OS crash may undo the last commits, so
// fires that succeeded may run again. A _pragma=synchronous(...) in the DSN
// wins over the option.
// On SQLite the hot writes — claims, results and lease extensions — that
// arrive while one of them holds the writer share the next transaction
// (group commit, combine.go): one commit and one sync for all of them, each
// caller's part under a savepoint so that a part that fails is rolled back
// alone. On MySQL and PostgreSQL they stay separate transactions on the
// pool, which measured faster there.
//
// Each Store writes through a pool of one connection (writes in SQLite are
// serialised anyway; one writer per process turns lock contention between
// goroutines into a queue instead of SQLITE_BUSY retries) and reads through a
// separate pool, which WAL lets run beside the writer. Several processes on
// one host may share the file; they contend on SQLite's file lock, bounded by
// the busy timeout.
//
// All instants are stored as int64 Unix nanoseconds and returned in UTC.
//
// # Where to start reading
//
// sqlstore.go is the frame: Open, the DSNs and dialects, the pools, and
// core, the connection every part shares (transactions and their retries,
// the migrations). Store is made of one type per noun, each in its files,
// in the order a fire goes through them:
//
//   - timerStore (timers.go, save.go, timercache.go): timers, their saves,
//     what the planner reads of them (TimersToPlan), and the claimed runs'
//     timers, read by version and cached;
//   - depStore (deps.go): the After edges, and the runs a finished run
//     starts downstream;
//   - runStore (insert.go, status.go, attempts.go, queries.go,
//     reports.go): planning's writes, guarded by the timers' versions;
//     status changes outside claims and results; reruns; reads of runs;
//   - claimStore (claim.go, leases.go, finish.go): ClaimRuns and Release;
//     extension, expiry and requeue of leases; results (FinishRuns);
//   - fleetStore (fleet.go): hand-offs and the shards of a fire;
//   - nodeStore (nodes.go, coord.go): heartbeats, the node list, and the
//     lock and election rows of the database coordination;
//   - securityStore (security.go, appsecrets.go), notifyStore (notify.go)
//     and historyStore (retention.go, dashboard.go).
//
// Besides core: runs.go holds the run row and the query helpers every part
// shares; combine.go the group commit of claims, results and extensions on
// SQLite; secrets.go the sealing of secrets at rest (sealer); backup.go
// the backups.
//
// A part reaches another only through a field of its struct (claimStore's
// deps, runStore's notify…), so a part's struct says what it depends on.
//
// The behaviour every file implements is stated once, in the suite of
// package internal/store/storetest, which sqlstore_test.go runs against every
// dialect.
package sqlstore
