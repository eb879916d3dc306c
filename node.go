package chime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/base/redisurl"
	"github.com/chimehq/chime/internal/coord/index"
	"github.com/chimehq/chime/internal/coord/index/memindex"
	"github.com/chimehq/chime/internal/coord/index/redisindex"
	"github.com/chimehq/chime/internal/coord/index/storeindex"
	"github.com/chimehq/chime/internal/coord/lock"
	"github.com/chimehq/chime/internal/coord/lock/flocklock"
	"github.com/chimehq/chime/internal/coord/lock/memlock"
	"github.com/chimehq/chime/internal/coord/lock/redislock"
	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/engine/notify"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/nodeparts"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

// DefaultApp is the app of timers defined by Every when Config.App is empty.
const DefaultApp = "default"

// The defaults that chime itself applies to a zero Config field; the
// defaults of the other fields are those of the packages that use them,
// and are printed by the help of the flags of `chime serve`.
const (
	// DefaultDataDir is Config.DataDir's default.
	DefaultDataDir = "chime-data"
	// DefaultBuckets is ClusterConfig.Buckets' default without Redis
	// (embedded or FileLocks).
	DefaultBuckets = 4
	// DefaultRedisBuckets is ClusterConfig.Buckets' default with Redis.
	// Every node of a cluster must use the same buckets.
	DefaultRedisBuckets = 16
	// DefaultDBBuckets is ClusterConfig.Buckets' default with coordination
	// in the database: each held slice costs a query of the store per
	// index poll and a lock row, so fewer slices than with Redis, still
	// enough to spread a minute over several nodes.
	DefaultDBBuckets = 8
)

// Timeouts of the Redis client of a cluster node (Config.Redis): a Redis
// that does not answer fails a call after these instead of holding the
// part that made it.
const (
	RedisDialTimeout  = 2 * time.Second
	RedisReadTimeout  = 2 * time.Second
	RedisWriteTimeout = 2 * time.Second
	// RedisPingTimeout bounds the check New makes that Redis answers.
	RedisPingTimeout = 5 * time.Second
)

// Config configures a Node. The zero value runs one node on SQLite under
// ./chime-data, and the zero value of each field means its default. The
// fields most applications set come first; the others are grouped by what
// they configure. Each field means what the `chime serve` flag of its name
// means (Plan.Fires: --plan-fires; docs/library.md lists them).
type Config struct {
	// DB is the store: sqlite:///path/file.db, mysql://user:pass@host:port/db
	// or postgres://user:pass@host:port/db. Default:
	// sqlite://./<DataDir>/chime.db.
	DB string
	// Redis holds the slice index, the locks and the leader election of a
	// cluster (ClusterConfig.Coordination "redis"): redis://host:port/0
	// (rediss:// with TLS), redis-sentinel://host:port,host:port/MASTER[?db=N]
	// (the primary named MASTER, found through its Sentinels and followed
	// across failovers) or redis-cluster://host:port,host:port (Redis
	// Cluster).
	Redis string
	// DataDir keeps the node id file (and lock files with
	// ClusterConfig.FileLocks). Default DefaultDataDir, relative to the
	// working directory.
	DataDir string
	// App is the app of the timers defined by Every (default DefaultApp).
	App string
	// Logger receives the node's logs (default slog.Default()).
	Logger *slog.Logger
	// Registerer, when set, receives the engine's Prometheus metrics and
	// those of the store's calls.
	Registerer prometheus.Registerer

	// Cluster is how this node finds its place among the nodes that share
	// its store.
	Cluster ClusterConfig
	// Plan is how far ahead runs are planned.
	Plan PlanConfig
	// Actions is what runs the actions of fires.
	Actions ActionsConfig
	// Security is what actions may reach and run, and how secrets are
	// stored (docs/security.md).
	Security SecurityConfig
	// Notify is how the notifications of timers' notify rules are sent
	// (docs/workflows.md).
	Notify NotifyConfig
	// History bounds the finished runs kept.
	History HistoryConfig
	// Database tunes the store's connections.
	Database DatabaseConfig

	// Test holds hooks for chime's own tests and tools; an application
	// leaves it zero.
	Test TestConfig
}

// ClusterConfig is how a node finds its place among the nodes that share
// its store: its identity, where the nodes coordinate, and the leases that
// bound a failover.
type ClusterConfig struct {
	// Coordination is where the nodes of a cluster keep their slice locks,
	// their leader elections and the slice index: "redis" (needs
	// Config.Redis), "db" (lease rows in the store's database, and an
	// index that reads its pending runs), or "auto", the default: "redis"
	// when Redis is set, "db" on MySQL/MariaDB and PostgreSQL, and in this
	// process (or in files with FileLocks) on SQLite. Every node of a
	// cluster must run the same: Start fails with
	// engine.ErrCoordinationMismatch beside a live node that runs another.
	Coordination string
	// NodeID identifies this node; default: generated once and kept in
	// Config.DataDir/node-id.
	NodeID string
	// Addr is the node's address shown in the node list (optional).
	Addr string
	// FileLocks, without Redis, is for several processes on one host that
	// share one SQLite file: the slice index reads the pending runs from
	// the store (internal/coord/index/storeindex) instead of keeping them in process, and
	// the slice locks and the leader election (Select, and chime's own
	// planner and sweeper duties) are flock files (internal/coord/lock/flocklock) in a
	// "chime-locks" directory beside the SQLite file, so that the
	// processes split the slices and elect one leader among them. Each
	// process needs its own node id (its own DataDir or NodeID).
	FileLocks bool
	// Buckets is the number of buckets per minute slice (default
	// DefaultBuckets; DefaultDBBuckets with coordination in the database,
	// DefaultRedisBuckets with Redis). Every node of a cluster must use
	// the same.
	Buckets int
	// LockTTL is the slice lock lease, which bounds failover after a crash
	// (default scheduler.DefaultLockTTL).
	LockTTL time.Duration
	// MaxClockSkew is the offset from the store's clock beyond which the
	// node stops claiming (default engine.DefaultMaxClockSkew).
	MaxClockSkew time.Duration
}

// PlanConfig is how far ahead runs are planned: each timer's next Fires
// fires or Ahead, whichever is later, up to Lookahead. A timer that fires
// every second then holds 30 pending runs, not 600.
type PlanConfig struct {
	// Lookahead is the planner's window (default planner.DefaultLookahead).
	Lookahead time.Duration
	// Fires is the count of fires planned at least (default
	// planner.DefaultFiresAhead).
	Fires int
	// Ahead is how far ahead runs are planned at least (default
	// engine.DefaultPlanAhead).
	Ahead time.Duration
}

// ActionsConfig is what runs the actions of fires.
type ActionsConfig struct {
	// Runners adds action runners by action type; "handler" and "shell"
	// are the node's own. An HTTP runner given here replaces chime's,
	// egress policy and signing included.
	Runners map[string]action.Runner
	// PoolSize is the count of actions running at once (default
	// executor.DefaultPoolSize).
	PoolSize int
	// Lease is the lease of a running attempt, extended while it runs
	// (default executor.DefaultLease).
	Lease time.Duration
}

// SecurityConfig is what actions may reach and run, and how secrets are
// stored (docs/security.md).
type SecurityConfig struct {
	// Egress decides which addresses HTTP callbacks may connect to (see
	// package egress); nil means egress.Default(). A timer whose URL is a
	// literal denied address is refused by Upsert. It applies to the HTTP
	// runner chime makes, not to one given in ActionsConfig.Runners.
	Egress *egress.Policy
	// AllowShell registers the shell action runner and lets timers use it.
	AllowShell bool
	// ShellAllow, when not empty, lists the only commands shell actions
	// may run (exact match of the action's command).
	ShellAllow []string
	// ShellEnvPass names variables of the node's environment that shell
	// actions get besides PATH, HOME, LANG and TZ (action.ShellRunner).
	ShellEnvPass []string
	// SecretKey, when set, is the AES-256 key (32 bytes) with which the
	// secrets of actions and the signing secrets are stored encrypted.
	SecretKey []byte
}

// NotifyConfig is how the notifications of timers' notify rules are sent
// (docs/workflows.md).
type NotifyConfig struct {
	// Email sends the email notifications; nil fails them, saying that
	// the node has no SMTP settings. chime serve passes send_email's.
	Email notify.Emailer
	// BaseURL prefixes the links in notifications (the node's public
	// URL); empty: the links are paths.
	BaseURL string
}

// HistoryConfig bounds the finished runs kept of each timer whose History
// does not set its own (model.History). The cluster's retention leader
// applies its own settings: give every node the same.
type HistoryConfig struct {
	// Keep is the count of finished runs kept per timer (default
	// retention.DefaultKeep; negative: no count limit).
	Keep int
	// MaxAge is the age beyond which finished runs, by their scheduled
	// time, and audit entries are deleted (default retention.DefaultMaxAge;
	// negative: no age limit).
	MaxAge time.Duration
}

// DatabaseConfig tunes the store's connections (sqlstore.Options).
type DatabaseConfig struct {
	MaxOpenConns int
	MaxIdleConns int
	// SQLiteSynchronous is how SQLite commits: "full" (default: each
	// claim and result is synced to disk before chime acts on it) or
	// "normal" (synced at checkpoints only: faster, but a power loss or an
	// OS crash may undo the last commits, and fires that succeeded may run
	// again). A _pragma=synchronous(...) in Config.DB wins.
	SQLiteSynchronous string
}

// TestConfig holds hooks for chime's own tests and for the tools that
// measure or test a node (internal/app/bench): they let such a tool see
// inside the node that New assembles, instead of assembling one of its own
// that would differ from production. An application leaves them zero.
type TestConfig struct {
	// Clock is this machine's clock, which every part of the node tells
	// time and waits by once the engine corrected it by its offset from
	// the store's clock (default clock.System(0)). See engine.Config.Clock
	// for the caveat of a fake clock.
	Clock clock.Clock
	// RedisPrefix starts the node's Redis keys (slice index, locks,
	// election) instead of redisindex.DefaultPrefix and
	// redislock.DefaultPrefix; every node of a cluster must use the same.
	// The bench gives each run a fresh prefix, so that runs sharing a
	// Redis do not see each other's keys.
	RedisPrefix string
	// WrapStore, when set, wraps the store New opened before any part of
	// the node is given it: the engine, the slice index of FileLocks, the
	// signing secrets of callbacks, and Upsert call the wrapper. The node
	// still closes the store it opened. The bench counts and times store
	// calls this way (internal/app/bench/storestats.go).
	WrapStore func(store.Store) store.Store
	// WrapRunner, when set, wraps each action runner of the node (those of
	// ActionsConfig.Runners and the node's own handler, HTTP and shell
	// runners), by action type, and returns the runner to use. The bench
	// records when each HTTP action starts this way. Wrapping the handler
	// runner does not change which handlers Handle registers. A wrapper of
	// the HTTP runner should forward its Lane (executor.Laner): without
	// it, the executor gives every callback a worker of its own.
	WrapRunner func(actionType string, r action.Runner) action.Runner
	// ClaimAhead is how long before its instant a run is claimed (default
	// trigger.DefaultClaimAhead). `chime bench --claim-ahead` sets it.
	ClaimAhead time.Duration
	// NotifyBackoff is the wait before a failed notification's second
	// delivery, doubled for each further one (default
	// notify.DefaultBackoff).
	NotifyBackoff time.Duration
}

// DefaultDB is the store DSN used when none is configured: the SQLite file
// chime.db in dataDir.
func DefaultDB(dataDir string) string {
	path := filepath.ToSlash(filepath.Join(dataDir, "chime.db"))
	if filepath.IsAbs(dataDir) {
		return "sqlite://" + path // sqlite:///abs/path/chime.db
	}
	return "sqlite://./" + path
}

func (c *Config) defaults() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.DB == "" {
		c.DB = DefaultDB(c.DataDir)
	}
	if c.App == "" {
		c.App = DefaultApp
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Security.Egress == nil {
		c.Security.Egress = egress.Default()
	}
}

// Node is one chime node embedded in the application. Create it with New,
// register handlers and timers, then Start it; Shutdown stops it. Its
// methods are safe for concurrent use.
type Node struct {
	cfg     Config
	id      string
	store   store.Store // the opened store, wrapped by TestConfig.WrapStore
	index   index.Index
	locker  lock.Locker
	elector lock.Elector
	// coordination is ClusterConfig.Coordination resolved (Coordination).
	coordination string
	engine       *engine.Engine
	metrics      *metrics.Metrics
	secrets      *action.SecretCache
	handlers     *action.HandlerRunner
	closers      []func() error

	mu       sync.Mutex
	valid    map[string]ArgsValidator
	pending  []Timer // defined by Every before Start
	started  bool
	shutdown bool
}

// The parts of a node that its public API does not show, for chime's own
// packages (internal/nodeparts).
func init() {
	nodeparts.Register(func(node any) nodeparts.Parts {
		n := node.(*Node)
		return nodeparts.Parts{Store: n.store, Engine: n.engine, Index: n.index, Secrets: n.secrets, Series: n.metrics.Series}
	})
}

// New opens the store and the backends and assembles the engine. Nothing
// runs until Start.
func New(cfg Config) (*Node, error) {
	cfg.defaults()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := NodeID(cfg.Cluster.NodeID, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, id: id, handlers: action.NewHandlerRunner(id), valid: map[string]ArgsValidator{}}
	ok := false
	defer func() {
		if !ok {
			n.close()
		}
	}()
	warnLooseDataDir(cfg.Logger, cfg.DataDir)
	st, err := sqlstore.Open(ctx, cfg.DB, sqlstore.Options{MaxOpenConns: cfg.Database.MaxOpenConns, MaxIdleConns: cfg.Database.MaxIdleConns,
		Synchronous: cfg.Database.SQLiteSynchronous, SecretKey: cfg.Security.SecretKey, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	n.closers = append(n.closers, st.Close)
	n.store = st
	if cfg.Test.WrapStore != nil {
		n.store = cfg.Test.WrapStore(st)
	}
	// The metrics are kept without a Registerer too: their Series feeds
	// the web UI's dashboard (nodeparts.Parts.Series). The store's calls are timed
	// and counted only with one.
	m := metrics.New(cfg.Registerer)
	n.metrics = m
	if cfg.Registerer != nil {
		n.store = metrics.InstrumentStore(n.store, m) // the frequent calls, timed and counted
	}
	buckets := cfg.Cluster.Buckets
	mode, err := coordination(cfg.Cluster.Coordination, cfg.Redis, st.Dialect())
	if err != nil {
		return nil, err
	}
	n.coordination = mode
	switch {
	case mode == model.CoordinationRedis:
		var closer func() error
		n.index, n.locker, n.elector, closer, err = redisBackends(ctx, cfg.Redis, cfg.Test.RedisPrefix, buckets)
		if err != nil {
			return nil, err
		}
		n.closers = append(n.closers, closer)
	case mode == model.CoordinationDB:
		if buckets <= 0 {
			buckets = DefaultDBBuckets
		}
		n.index, n.locker, n.elector = storeindex.New(n.store, buckets), st.Locker(""), st.Elector("")
	default:
		if buckets <= 0 {
			buckets = DefaultBuckets
		}
		if cfg.Cluster.FileLocks {
			dir := lockDir(cfg.DB, cfg.DataDir)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("lock dir: %w", err)
			}
			l, err := flocklock.NewLocker(dir)
			if err != nil {
				return nil, err
			}
			e, err := flocklock.NewElector(dir)
			if err != nil {
				return nil, err
			}
			n.index, n.locker, n.elector = storeindex.New(n.store, buckets), l, e
			n.closers = append(n.closers, e.Close)
		} else {
			// The index holds the slices due within the next minute; the
			// trigger reads those further ahead from the store when it
			// takes them (memindex.Options.Horizon).
			n.index = memindex.NewWithOptions(memindex.Options{Buckets: buckets, Horizon: memindex.DefaultHorizon, Clock: cfg.Test.Clock})
			n.locker = memlock.NewLocker(nil)
			n.elector = memlock.NewElector(nil)
		}
	}
	runners := map[string]action.Runner{}
	for k, v := range cfg.Actions.Runners {
		runners[k] = v
	}
	runners[model.ActionHandler] = n.handlers
	// Callbacks and notification webhooks leave under the egress policy,
	// signed with their app's secrets (created here for apps that have
	// none).
	secrets := action.NewSecretCache(n.store, action.SecretCacheOptions{Logger: cfg.Logger, Clock: cfg.Test.Clock})
	n.secrets = secrets
	httpRunner := action.NewHTTPRunnerWith(action.HTTPOptions{Egress: cfg.Security.Egress, Clock: cfg.Test.Clock, Secrets: secrets})
	if runners[model.ActionHTTP] == nil {
		runners[model.ActionHTTP] = httpRunner
	}
	if cfg.Security.AllowShell {
		runners[model.ActionShell] = &action.ShellRunner{Allow: cfg.Security.ShellAllow, EnvPass: cfg.Security.ShellEnvPass}
	} else {
		delete(runners, model.ActionShell)
	}
	if cfg.Test.WrapRunner != nil {
		for typ, r := range runners {
			runners[typ] = cfg.Test.WrapRunner(typ, r)
		}
	}
	n.engine, err = engine.New(engine.Config{
		Store: n.store, Index: n.index, Locker: n.locker, Elector: n.elector,
		NodeID: id, Addr: cfg.Cluster.Addr, Runners: runners, ClaimAhead: cfg.Test.ClaimAhead,
		Handlers: n.handlers.Names, HasHandler: n.handlers.Exists,
		Lookahead: cfg.Plan.Lookahead, PlanFires: cfg.Plan.Fires, PlanAhead: cfg.Plan.Ahead, PoolSize: cfg.Actions.PoolSize,
		LockTTL: cfg.Cluster.LockTTL, Lease: cfg.Actions.Lease, MaxClockSkew: cfg.Cluster.MaxClockSkew, Coordination: mode,
		HistoryKeep: cfg.History.Keep, HistoryMaxAge: cfg.History.MaxAge, Clock: cfg.Test.Clock,
		Notify: &notify.Config{Client: httpRunner.Client, Secrets: secrets, Email: cfg.Notify.Email, BaseURL: cfg.Notify.BaseURL,
			Backoff: cfg.Test.NotifyBackoff},
		Metrics: m, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	if fl, ok := n.locker.(*flocklock.Locker); ok {
		// Lock records are judged by the cluster's clock, not this
		// machine's uncorrected one.
		fl.SetClock(n.engine.Clock())
	}
	ok = true
	return n, nil
}

func (n *Node) close() {
	for i := len(n.closers) - 1; i >= 0; i-- {
		_ = n.closers[i]()
	}
	n.closers = nil
}

// ErrShutdown is returned by Start after Shutdown: a node that was shut
// down has closed its store and cannot start again; create a new one with
// New.
var ErrShutdown = errors.New("chime: node was shut down; create a new one with New")

// Start starts the engine, then upserts the timers defined by Every before
// it. Runs missed while no node ran are recovered at once. Start on a
// started node returns an error; after Shutdown it returns ErrShutdown.
// When the engine fails to start (the store does not answer), the error
// is returned and Start may be called again.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	if n.shutdown {
		n.mu.Unlock()
		return ErrShutdown
	}
	if n.started {
		n.mu.Unlock()
		return errors.New("chime: node already started")
	}
	n.started = true
	pending := n.pending
	n.pending = nil
	n.mu.Unlock()
	if err := n.engine.Start(ctx); err != nil {
		n.mu.Lock()
		n.started = false
		n.pending = append(pending, n.pending...)
		n.mu.Unlock()
		return fmt.Errorf("chime: start engine: %w", err)
	}
	var errs []error
	for _, t := range pending {
		if _, err := n.Upsert(ctx, t); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Shutdown stops dispatching, hands this node's slices over to the other
// nodes, lets in-flight runs finish until ctx is done, records their
// results and closes the store and the backends.
func (n *Node) Shutdown(ctx context.Context) error {
	n.mu.Lock()
	if n.shutdown {
		n.mu.Unlock()
		return nil
	}
	n.shutdown = true
	n.mu.Unlock()
	err := n.engine.Shutdown(ctx)
	n.close()
	return err
}

// ID is the node's id.
func (n *Node) ID() string { return n.id }

// Coordination is where the node's slice locks, leader elections and slice
// index live: model.CoordinationRedis, CoordinationDB or CoordinationLocal
// (ClusterConfig.Coordination resolved).
func (n *Node) Coordination() string { return n.coordination }

// Select elects one leader of service among the nodes that call it with
// the same service, with the node's Elector (Redis in a cluster; in
// process, or flock files with FileLocks, otherwise). The first caller when
// no leader holds the service leads for hold; the leader's own calls extend
// its term; every caller learns the leader's id. nodeID is the candidate's
// id, usually n.ID(). Services are namespaced apart from chime's own.
func (n *Node) Select(ctx context.Context, service, nodeID string, hold time.Duration) (leaderID string, err error) {
	if service == "" {
		return "", errors.New("chime: Select: empty service")
	}
	return n.elector.Select(ctx, "app:"+service, nodeID, hold)
}

// Handle registers h under name, replacing any handler of that name. It
// may be called before or after Start. It panics on an empty name or a nil
// handler.
func (n *Node) Handle(name string, h Handler) {
	if h == nil {
		panic("chime: nil handler for " + name)
	}
	n.handlers.Register(name, handlerRunner{name: name, h: h})
	n.mu.Lock()
	if v, ok := h.(ArgsValidator); ok {
		n.valid[name] = v
	} else {
		delete(n.valid, name)
	}
	n.mu.Unlock()
}

// HandleFunc registers f under name.
func (n *Node) HandleFunc(name string, f func(ctx context.Context, run *Run) (output []byte, err error)) {
	n.Handle(name, HandlerFunc(f))
}

// HandlerExists reports whether a handler is registered on this node
// under name.
func (n *Node) HandlerExists(name string) bool { return n.handlers.Exists(name) }

// Handlers returns the names of the handlers registered on this node.
func (n *Node) Handlers() []string { return n.handlers.Names() }

// ValidateArgs checks args with the ArgsValidator of the handler registered
// under name, if it has one. It returns a *model.FieldError for
// action.handler.args.
func (n *Node) ValidateArgs(name string, args []byte) error {
	n.mu.Lock()
	v := n.valid[name]
	n.mu.Unlock()
	if v == nil {
		return nil
	}
	if err := v.ValidateArgs(args); err != nil {
		return &model.FieldError{Field: "action.handler.args", Message: err.Error()}
	}
	return nil
}

// MaxNodeID is the longest node id, in bytes, that every store takes (the
// node columns are VARCHAR(255) on MySQL/MariaDB).
const MaxNodeID = 255

// checkNodeID reports a node id that a store could not record on every
// claim: too long, not UTF-8, or with control characters (NUL among them).
func checkNodeID(id string) error {
	if len(id) > MaxNodeID || !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl) {
		return fmt.Errorf("node id %q: want at most %d bytes of UTF-8 text without control characters", id, MaxNodeID)
	}
	return nil
}

// NodeID returns configured, or the node id kept in dataDir/node-id,
// creating it (hostname and random hex) on first use. An id that a store
// could not record (see MaxNodeID) is an error.
func NodeID(configured, dataDir string) (string, error) {
	if configured != "" {
		return configured, checkNodeID(configured)
	}
	path := filepath.Join(dataDir, "node-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			// The file is chime's own: an older chime made it 0644.
			if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
				_ = os.Chmod(path, 0o600)
			}
			return id, checkNodeID(id)
		}
	}
	host, _ := os.Hostname()
	host = host[:min(len(host), MaxNodeID-9)] // room for "-" and 8 hex digits
	var r [4]byte
	_, _ = rand.Read(r[:])
	id := fmt.Sprintf("%s-%s", host, hex.EncodeToString(r[:]))
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	return id, nil
}

// warnLooseDataDir logs a warning when the data dir exists and other users
// may enter it. Chime creates it 0700, but does not chmod a directory it
// finds (it may be the user's, or shared on purpose).
func warnLooseDataDir(log *slog.Logger, dir string) {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the data dir may be read by other users: chmod 700 it", "dir", dir, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
}

// redisBackends connects the cluster's slice index, locks and election to
// the Redis at url, under prefix (empty: the packages' defaults). Every node
// of a cluster must use the same prefix and buckets.
func redisBackends(ctx context.Context, url, prefix string, buckets int) (index.Index, lock.Locker, lock.Elector, func() error, error) {
	rc, err := redisurl.Parse(url)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("%w: --redis %s: %v", ErrConfig, Redact(url), err)
	}
	timeouts := redisurl.Timeouts{Dial: RedisDialTimeout, Read: RedisReadTimeout, Write: RedisWriteTimeout}
	client := rc.New(timeouts)
	pctx, cancel := context.WithTimeout(ctx, RedisPingTimeout)
	defer cancel()
	if err := client.Ping(pctx).Err(); err != nil {
		client.Close()
		return nil, nil, nil, nil, fmt.Errorf("redis %s: %w", Redact(url), err)
	}
	if buckets <= 0 {
		buckets = DefaultRedisBuckets
	}
	// The locks and the election get a connection pool of their own: the
	// extensions of slice locks are what the takeover bound counts on, and
	// must not wait for a connection behind the index's bulk traffic (the
	// adds and removals of thousands of runs after a database stall).
	locks := rc.New(timeouts)
	closeAll := func() error { return errors.Join(client.Close(), locks.Close()) }
	return redisindex.New(client, redisindex.Options{Prefix: prefix, Buckets: buckets}),
		redislock.NewLocker(locks, redislock.Options{Prefix: prefix}),
		redislock.NewElector(locks, redislock.Options{Prefix: prefix}),
		closeAll, nil
}

// Redact hides the password of a DSN or URL, for logs.
func Redact(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	scheme := strings.Index(dsn, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return dsn
	}
	userinfo := dsn[scheme+3 : at]
	if i := strings.Index(userinfo, ":"); i >= 0 {
		return dsn[:scheme+3] + userinfo[:i] + ":***" + dsn[at:]
	}
	return dsn
}

// lockDir is where processes sharing one SQLite file keep their lock
// files: beside the file, so that processes with different data dirs meet.
func lockDir(dsn, dataDir string) string {
	path, ok := strings.CutPrefix(dsn, "sqlite://")
	if !ok {
		path, ok = strings.CutPrefix(dsn, "sqlite:")
	}
	if !ok || path == "" || strings.HasPrefix(path, ":memory:") {
		return filepath.Join(dataDir, "chime-locks")
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	return filepath.Join(filepath.Dir(path), "chime-locks")
}

// ErrConfig is wrapped by New's errors that come from a contradiction in
// Config, so that a command can answer them as bad usage.
var ErrConfig = errors.New("bad configuration")

// coordination resolves ClusterConfig.Coordination against the Redis URL and the
// store's dialect.
func coordination(mode, redisURL, dialect string) (string, error) {
	switch mode {
	case "", "auto":
		switch {
		case redisURL != "":
			return model.CoordinationRedis, nil
		case dialect == "sqlite":
			return model.CoordinationLocal, nil
		}
		return model.CoordinationDB, nil
	case model.CoordinationRedis:
		if redisURL == "" {
			return "", fmt.Errorf("%w: coordination redis needs a Redis URL (--redis)", ErrConfig)
		}
		return mode, nil
	case model.CoordinationDB:
		if redisURL != "" {
			return "", fmt.Errorf("%w: coordination db keeps nothing in Redis: drop --redis, or choose --coordination redis or auto", ErrConfig)
		}
		return mode, nil
	}
	return "", fmt.Errorf("%w: coordination %q: want auto, db or redis", ErrConfig, mode)
}
