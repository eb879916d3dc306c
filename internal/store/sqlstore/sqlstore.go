package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers driver "pgx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/chimehq/chime/internal/store"
)

//go:embed migrations
var migrationsFS embed.FS

type dialect int

const (
	dialectSQLite dialect = iota
	dialectMySQL
	dialectPostgres
)

func (d dialect) String() string {
	switch d {
	case dialectSQLite:
		return "sqlite"
	case dialectMySQL:
		return "mysql"
	case dialectPostgres:
		return "postgres"
	}
	return "unknown"
}

// Options tunes the connection pool. Zero values pick defaults: for MySQL and
// PostgreSQL 32 open and 16 idle connections and a 30 minute lifetime; for
// SQLite they size the read pool (default 8), the write pool is always one
// connection.
type Options struct {
	MaxOpenConns    int
	MaxIdleConns    int
	ConnMaxLifetime time.Duration
	// Synchronous is SQLite's commit durability: SynchronousFull (the
	// default, "" means it) or SynchronousNormal; see the package
	// documentation. Other dialects ignore it. Open rejects other values.
	Synchronous string

	// SecretKey, when set, is the AES-256 key (SecretKeySize bytes) with
	// which the secrets of actions and the signing secrets are stored
	// encrypted; see secrets.go and ParseSecretKey.
	SecretKey []byte
	// Logger receives warnings (a database file that others may read);
	// nil: slog.Default().
	Logger *slog.Logger
}

// The values of Options.Synchronous.
const (
	// SynchronousFull syncs the WAL at every commit: a commit survives a
	// power loss or an OS crash.
	SynchronousFull = "full"
	// SynchronousNormal syncs the WAL only at checkpoints: a commit
	// survives a crash of the process, but a power loss or an OS crash may
	// undo the last ones.
	SynchronousNormal = "normal"
)

// synchronousPragma returns the SQLite pragma value for opts.Synchronous.
func synchronousPragma(v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", SynchronousFull:
		return "FULL", nil
	case SynchronousNormal:
		return "NORMAL", nil
	}
	return "", fmt.Errorf("sqlite synchronous %q: want %s or %s", v, SynchronousFull, SynchronousNormal)
}

// batchSize is the number of rows per multi-row statement and the number of
// ids per IN list.
const batchSize = 500

// Store is a store.Store over a SQL database. It is safe for concurrent use.
//
// Its methods are those of its parts, one type per noun (listed in the
// package documentation), which share the connection (core) and reach each
// other only through their fields.
type Store struct {
	*core
	*timerStore
	*depStore
	*runStore
	*claimStore
	*fleetStore
	*nodeStore
	*securityStore
	*notifyStore
	*historyStore
}

// newStore makes the parts of a store over c.
func newStore(c *core) *Store {
	deps := &depStore{core: c}
	notify := &notifyStore{core: c}
	sec := &securityStore{core: c}
	runs := &runStore{core: c, deps: deps, notify: notify}
	timers := &timerStore{core: c, deps: deps, runs: runs, sec: sec}
	return &Store{
		core:          c,
		timerStore:    timers,
		depStore:      deps,
		runStore:      runs,
		claimStore:    &claimStore{core: c, timers: timers, deps: deps, notify: notify},
		fleetStore:    &fleetStore{core: c, deps: deps},
		nodeStore:     &nodeStore{core: c},
		securityStore: sec,
		notifyStore:   notify,
		historyStore:  &historyStore{core: c},
	}
}

// core is the connection the parts of a Store share: the pools and the
// dialect, transactions and their retries, the group commit of the hot
// writes, the sealing of secrets, and the row helpers of every part.
type core struct {
	d dialect
	// w takes every write. For SQLite it is a separate one-connection pool;
	// otherwise it is the same pool as r.
	w *sql.DB
	r *sql.DB
	// hot counts the claims and results waiting for or holding the writer
	// (see yieldToHot).
	hot atomic.Int32
	// comb combines the transactions of claims and results when
	// combineWrites is set (see combiner).
	comb          combiner
	combineWrites bool
	// txs and stmts count write transactions and their statements (Counts).
	txs, stmts atomic.Int64
	// sealer seals secrets at rest.
	sealer
	// dsn is the DSN the store was opened with, for BackupIn's dump tools.
	dsn string
	// stmtc keeps the SQLite writer's statements prepared; nil on the
	// other dialects.
	stmtc *stmtCache
}

// hotOp marks a claim or a result batch in progress until the returned func
// is called: planning inserts yield the SQLite writer to it.
func (s *core) hotOp() func() {
	s.hot.Add(1)
	return func() { s.hot.Add(-1) }
}

// maxYield bounds how long one planning transaction waits for the hot path:
// under sustained load the planner still gets the writer at least this
// often.
const maxYield = 10 * time.Millisecond

// yieldToHot waits, at most maxYield, while claims or results wait for the
// SQLite writer. database/sql hands a free connection to a random waiter,
// so without this a claim due in a few hundred milliseconds can wait behind
// a planning pass's train of insert transactions. Other dialects have a
// pool of writers and do not wait.
func (s *core) yieldToHot(ctx context.Context) {
	if s.d != dialectSQLite {
		return
	}
	deadline := time.Now().Add(maxYield)
	for s.hot.Load() > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(200 * time.Microsecond)
	}
}

// maxTxHold bounds how long a planning transaction on SQLite goes on
// adding statements while nothing waits for the writer (see extendTx).
const maxTxHold = 25 * time.Millisecond

// extendTx reports whether a planning transaction begun at start may take
// one more statement. On SQLite, a commit writes every page the
// transaction changed, and consecutive statements of a planning pass change
// many of the same pages (the per-timer index, the table's pages of one
// second), so one transaction for several statements writes each page
// once. It stops as soon as a claim or a result waits for the writer, and
// after maxTxHold. Other dialects keep one statement per transaction.
func (s *core) extendTx(start time.Time) bool {
	return s.d == dialectSQLite && s.hot.Load() == 0 && time.Since(start) < maxTxHold
}

var _ store.Store = (*Store)(nil)

// Open connects to the database named by dsn, applies the migrations and
// returns the store. See the package documentation for the DSN forms.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	c, err := open(dsn, opts)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := newStore(c)
	if err := s.ping(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store: ping %s: %w", s.d, err)
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open store: migrate %s: %w", s.d, err)
	}
	return s, nil
}

// ping connects once. On SQLite, a connection's first statements (its
// pragmas) can find a new file locked while another process or store turns
// it to WAL mode, which the busy timeout does not cover: those are retried
// for a few seconds.
func (s *core) ping(ctx context.Context) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := s.r.PingContext(ctx)
		if err == nil || s.d != dialectSQLite || !s.retryable(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func open(dsn string, opts Options) (*core, error) {
	aead, err := newAEAD(opts.SecretKey)
	if err != nil {
		return nil, err
	}
	s, err := openDialect(dsn, opts)
	if err != nil {
		return nil, err
	}
	s.sealer = sealer{aead: aead}
	s.dsn = dsn
	// Group commit pays on SQLite, whose one writer commits (and with
	// synchronous=FULL syncs) one transaction at a time. On PostgreSQL and
	// MySQL, parallel transactions on the pool measured faster
	// (BenchmarkClaimFinishParallel: PostgreSQL 16,800 runs/s separate,
	// 9,600 combined; MariaDB the same either way).
	s.combineWrites = s.d == dialectSQLite
	return s, nil
}

func openDialect(dsn string, opts Options) (*core, error) {
	if _, err := synchronousPragma(opts.Synchronous); err != nil {
		return nil, err
	}
	scheme, rest, ok := strings.Cut(dsn, ":")
	if !ok {
		return nil, fmt.Errorf("dsn %q: missing scheme (sqlite:, mysql:// or postgres://)", redact(dsn))
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3", "file":
		return openSQLite(rest, opts)
	case "mysql", "mariadb":
		return openMySQL(dsn, opts)
	case "postgres", "postgresql":
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			return nil, err
		}
		pool(db, opts)
		return &core{d: dialectPostgres, w: db, r: db}, nil
	}
	return nil, fmt.Errorf("dsn %q: unknown scheme %q", redact(dsn), scheme)
}

// redact hides the password of a URL-like DSN.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	return u.Redacted()
}

func pool(db *sql.DB, opts Options) {
	if opts.MaxOpenConns <= 0 {
		opts.MaxOpenConns = 32
	}
	if opts.MaxIdleConns <= 0 {
		opts.MaxIdleConns = min(16, opts.MaxOpenConns)
	}
	if opts.ConnMaxLifetime <= 0 {
		opts.ConnMaxLifetime = 30 * time.Minute
	}
	db.SetMaxOpenConns(opts.MaxOpenConns)
	db.SetMaxIdleConns(opts.MaxIdleConns)
	db.SetConnMaxLifetime(opts.ConnMaxLifetime)
}

func openMySQL(dsn string, opts Options) (*core, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("dsn: %w", err)
	}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = u.Host + ":3306"
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	// Client-side interpolation saves a prepare round trip per statement;
	// found rows make "affected rows" count matched rows, as elsewhere.
	cfg.InterpolateParams = true
	cfg.ClientFoundRows = true
	cfg.Params = map[string]string{}
	q := u.Query()
	for k := range q {
		cfg.Params[k] = q.Get(k)
	}
	_, set1 := cfg.Params["transaction_isolation"]
	_, set2 := cfg.Params["tx_isolation"]
	if !set1 && !set2 {
		// Read committed: no gap locks, so concurrent batch inserts and
		// claims do not deadlock on ranges they do not touch. MySQL 8 and
		// MariaDB 11.1+ call the variable transaction_isolation, older
		// MariaDB tx_isolation: ask the server which one it knows.
		v, err := mysqlIsolationVar(cfg)
		if err != nil {
			return nil, err
		}
		cfg.Params[v] = "'READ-COMMITTED'"
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("dsn: %w", err)
	}
	db := sql.OpenDB(conn)
	pool(db, opts)
	return &core{d: dialectMySQL, w: db, r: db}, nil
}

func openSQLite(rest string, opts Options) (*core, error) {
	rest = strings.TrimPrefix(rest, "//")
	p, query, _ := strings.Cut(rest, "?")
	params, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("dsn: %w", err)
	}
	if p == "" {
		return nil, errors.New("dsn: sqlite path is empty")
	}
	if p == ":memory:" {
		// One connection only: each connection to :memory: is its own
		// database.
		name := "file:chime-" + randomHex(8) + "?mode=memory&_pragma=foreign_keys(1)"
		db, err := sql.Open("sqlite", name)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		return &core{d: dialectSQLite, w: db, r: db, stmtc: newStmtCache()}, nil
	}
	if err := prepareFile(p, opts.Logger); err != nil {
		return nil, err
	}
	base := url.Values{}
	for k, v := range params {
		base[k] = v
	}
	base.Add("_pragma", "busy_timeout(5000)")
	base.Add("_pragma", "journal_mode(WAL)")
	base.Add("_pragma", "foreign_keys(1)")
	base.Add("_pragma", "temp_store(MEMORY)")
	// Reads through a memory map instead of a pread per page, up to 256 MiB
	// of the file (pages mapped count in the process's RSS, but are the
	// kernel's page cache, not the heap).
	if !hasPragma(params, "mmap_size") {
		base.Add("_pragma", "mmap_size(268435456)")
	}
	if !hasPragma(params, "synchronous") {
		level, err := synchronousPragma(opts.Synchronous)
		if err != nil {
			return nil, err
		}
		base.Add("_pragma", "synchronous("+level+")")
	}
	wq := url.Values{}
	for k, v := range base {
		wq[k] = slices.Clone(v)
	}
	wq.Set("_txlock", "immediate")
	// The writer carries every write of the hot path: a 16 MiB page cache
	// (the pages it misses come from the kernel's page cache), and a
	// checkpoint every 10,000 WAL pages (40 MiB) instead of 1,000, which
	// copies a page rewritten many times once and stalls the writer ten
	// times less often. The cache costs more than its size in anonymous
	// memory (each 4 KiB page comes with its header from the driver's
	// allocator): with 64 MiB the process held 100–140 MiB besides the
	// Go runtime's memory; with 16 MiB, 13–41.
	if !hasPragma(params, "cache_size") {
		wq.Add("_pragma", "cache_size(-16384)")
	}
	if !hasPragma(params, "wal_autocheckpoint") {
		wq.Add("_pragma", "wal_autocheckpoint(10000)")
	}
	w, err := sql.Open("sqlite", "file:"+p+"?"+wq.Encode())
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	r, err := sql.Open("sqlite", "file:"+p+"?"+base.Encode())
	if err != nil {
		w.Close()
		return nil, err
	}
	if opts.MaxOpenConns <= 0 {
		opts.MaxOpenConns = 8
	}
	pool(r, opts)
	r.SetConnMaxLifetime(0)
	return &core{d: dialectSQLite, w: w, r: r, stmtc: newStmtCache()}, nil
}

// prepareFile creates the SQLite file p, and its directory, readable by
// the owner only (0600 and 0700), before the driver opens it: SQLite gives
// the -wal and -shm files it creates the mode of the database file. A file
// that exists already keeps its mode, but one that the group or others may
// read is logged as a warning (it holds the timers, their runs and, without
// a secret key, their secrets).
func prepareFile(p string, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	if dir := filepath.Dir(p); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create database directory: %w", err)
		}
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		if err := f.Close(); err != nil {
			return fmt.Errorf("create database file: %w", err)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create database file: %w", err)
	}
	for _, name := range []string{p, p + "-wal", p + "-shm"} {
		if fi, err := os.Stat(name); err == nil && fi.Mode().Perm()&0o077 != 0 {
			log.Warn("the SQLite database file may be read by other users: chmod 600 it (its -wal and -shm files follow its mode)",
				"file", name, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
		}
	}
	return nil
}

func hasPragma(q url.Values, name string) bool {
	for _, v := range q["_pragma"] {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), name) {
			return true
		}
	}
	return false
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Close closes the connection pools.
func (s *core) Close() error {
	if s.stmtc != nil {
		s.stmtc.close()
	}
	err := s.w.Close()
	if s.r != s.w {
		err = errors.Join(err, s.r.Close())
	}
	return err
}

// Ping checks that the database answers.
func (s *core) Ping(ctx context.Context) error {
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("ping %s: %w", s.d, err)
	}
	return nil
}

// q rewrites the ? placeholders of query for the dialect.
func (s *core) q(query string) string {
	if s.d != dialectPostgres {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// placeholders returns "?,?,?" with n marks.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// txFunc is the body of a transaction.
type txFunc func(tx *wtx) error

// wtx is a write transaction that counts its statements (Store.Counts).
type wtx struct {
	*sql.Tx
	n *atomic.Int64
	// stmts, when set, gives the statements prepared on the writer.
	stmts *stmtCache
}

// stmt returns query's prepared statement within t, or nil.
func (t *wtx) stmt(ctx context.Context, query string) *sql.Stmt {
	if t.stmts == nil {
		return nil
	}
	if st := t.stmts.get(query); st != nil {
		return t.Tx.StmtContext(ctx, st)
	}
	return nil
}

// prepare returns query prepared within t: the writer's cached statement
// when there is one (see stmtCache), else one prepared for t alone.
func (t *wtx) prepare(ctx context.Context, query string) (*sql.Stmt, error) {
	if st := t.stmt(ctx, query); st != nil {
		return st, nil
	}
	return t.Tx.PrepareContext(ctx, query)
}

func (t *wtx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	t.n.Add(1)
	if st := t.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *wtx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	t.n.Add(1)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t *wtx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	t.n.Add(1)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// begin starts a write transaction.
func (s *core) begin(ctx context.Context) (*wtx, error) {
	if s.stmtc != nil {
		s.stmtc.prepare(ctx, s.w)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &wtx{Tx: tx, n: &s.stmts, stmts: s.stmtc}, nil
}

// commit commits tx and counts it.
func (s *core) commit(tx *wtx) error {
	if err := tx.Commit(); err != nil {
		return err
	}
	s.txs.Add(1)
	return nil
}

// Counts returns how many write transactions this store committed and how
// many statements it ran in write transactions (committed or not,
// savepoints included) since it was opened. Reads outside a transaction
// and single-statement writes outside one (lease extensions, heartbeats,
// timers) are not counted; a result batch on PostgreSQL, one statement
// outside a transaction, counts as a transaction of one statement. It is
// for benchmarks: statements and commits per fire.
func (s *core) Counts() (transactions, statements int64) {
	return s.txs.Load(), s.stmts.Load()
}

// tx runs fn in a write transaction, retrying it a few times when the
// database reports a deadlock or a busy lock.
func (s *core) tx(ctx context.Context, fn txFunc) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
			}
		}
		err = s.tryTx(ctx, fn)
		if err == nil || !s.retryable(err) {
			return err
		}
	}
	return err
}

func (s *core) tryTx(ctx context.Context, fn txFunc) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := s.commit(tx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// retryable reports whether err is a transient lock conflict.
func (s *core) retryable(err error) bool {
	var lost *txLostError
	if errors.As(err, &lost) && s.retryable(lost.cause) {
		return true // a deadlock rolled the transaction back, savepoints too
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205 // deadlock, lock wait timeout
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001" // deadlock, serialization
	}
	return false
}

// isUnique reports whether err is a unique or primary key violation.
func isUnique(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	return false
}

// migrate applies the embedded migrations of the dialect that are missing.
func (s *core) migrate(ctx context.Context) error {
	dir := path.Join("migrations", s.d.String())
	entries, err := fs.ReadDir(migrationsFS, dir)
	if err != nil {
		return err
	}
	type migration struct {
		version int
		name    string
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return fmt.Errorf("bad migration file name %q", e.Name())
		}
		ms = append(ms, migration{v, e.Name()})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })

	conn, err := s.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()

	const create = `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT NOT NULL PRIMARY KEY, applied_at BIGINT NOT NULL)`
	switch s.d {
	case dialectMySQL:
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK('chime_schema_migrations', 120)`).Scan(&got); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if got.Int64 != 1 {
			return errors.New("lock: timed out waiting for another process's migration")
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK('chime_schema_migrations')`)
	case dialectPostgres:
		// Key: an arbitrary constant that identifies chime's migrations.
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(7366952435463101001)`); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(7366952435463101001)`)
	}
	if s.d != dialectSQLite {
		if _, err := conn.ExecContext(ctx, create); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
	}
	// On SQLite the whole migration runs in one immediate transaction,
	// which is the lock; elsewhere each migration is one transaction (MySQL
	// commits DDL implicitly, hence the named lock).
	apply := func(m migration) error {
		body, err := fs.ReadFile(migrationsFS, path.Join(dir, m.name))
		if err != nil {
			return err
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if s.d == dialectSQLite {
			if _, err := tx.ExecContext(ctx, create); err != nil {
				return fmt.Errorf("create schema_migrations: %w", err)
			}
		}
		var n int
		if err := tx.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), m.version).Scan(&n); err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		if n > 0 {
			return nil
		}
		for _, stmt := range splitSQL(string(body)) {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
		}
		if step := dataMigrations[m.version]; step != nil {
			if err := step(ctx, s, tx); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
		}
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`),
			m.version, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("%s: record: %w", m.name, err)
		}
		return tx.Commit()
	}
	for _, m := range ms {
		if err := apply(m); err != nil {
			return err
		}
	}
	return nil
}

// splitSQL splits a migration file into statements at semicolons that end a
// line. Migrations must not contain such semicolons inside statements.
func splitSQL(body string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			stmt := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			if stmt != "" {
				out = append(out, stmt)
			}
			cur.Reset()
		}
	}
	if stmt := strings.TrimSpace(cur.String()); stmt != "" {
		out = append(out, stmt)
	}
	return out
}

// mysqlIsolationVar returns the name of the server's transaction isolation
// system variable.
func mysqlIsolationVar(cfg *mysql.Config) (string, error) {
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return "", fmt.Errorf("dsn: %w", err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var v sql.NullString
	if err := db.QueryRowContext(ctx, `SELECT @@SESSION.transaction_isolation`).Scan(&v); err == nil {
		return "transaction_isolation", nil
	}
	if err := db.QueryRowContext(ctx, `SELECT @@SESSION.tx_isolation`).Scan(&v); err != nil {
		return "", fmt.Errorf("read isolation level: %w", err)
	}
	return "tx_isolation", nil
}
