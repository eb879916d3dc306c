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
// sqlstore.go is the frame: Open, the DSNs and dialects, the pools, the
// transactions and their retries, and the migrations. Then one file per
// seam, in the order a fire goes through them:
//
//   - timers.go: timers, and what the planner reads of them (TimersToPlan);
//   - runs.go: the run row and the query helpers the run files share;
//   - insert.go: planning's writes, InsertRuns and InsertPlanned (guarded
//     by the timers' versions);
//   - queries.go: reads of runs (one, the list, the due and pending
//     windows, a node's running runs, counts);
//   - claim.go: ClaimRuns and Release; timercache.go: the claimed runs'
//     timers, read by version and cached;
//   - combine.go: the group commit of claims, results and extensions on
//     SQLite;
//   - leases.go: extension, expiry and requeue of running runs;
//   - finish.go: results, FinishRuns, and the cleaning of
//     their text;
//   - status.go: status changes outside claims and results;
//   - nodes.go: heartbeats, the node list, stats and the database's clock;
//   - security.go: tokens, audit and signing secrets; secrets.go: the
//     sealing of secrets at rest.
//
// The behaviour every file implements is stated once, in the suite of
// package internal/store/storetest, which sqlstore_test.go runs against every
// dialect.
package sqlstore
