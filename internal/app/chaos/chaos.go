// Package chaos runs a chime cluster under faults and checks its delivery
// guarantees (docs/guarantees.md, docs/chaos.md).
//
// Run starts nodes of a chime binary (`chime serve`) on loopback, over a
// shared SQLite file with file locks, or over MySQL/MariaDB or PostgreSQL
// and Redis, an HTTP receiver in this process (not in the nodes), and a few
// hundred HTTP timers with mixed schedules, a share of them with long
// actions (the receiver holds their callbacks open). For Config.Duration it
// injects faults one after the other at random intervals: SIGKILL a node
// and restart it, SIGSTOP a node longer than its lease and SIGCONT it,
// restart Redis, restart the database, freeze the database (SIGSTOP, or on
// SQLite hold its write lock), restart a node with its clock shifted, cut
// a node off from its database, its Redis or both (proxy.go). After
// a settle phase without faults it compares every expected (timer, instant)
// with the callbacks received and the runs in the store, and returns a
// Report: missed fires, duplicate deliveries (by cause) and executions,
// concurrent executions, early fires, completed deliveries not recorded,
// and the fire-delay distribution outside and during faults.
//
// Chaos assembles no node of its own: the nodes are `chime serve`
// processes, built by chime.New like every other node, and their defaults
// (DefaultNodeLease, DefaultNodeLockTTL) are chime's constants.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/engine/executor"
	"github.com/chimehq/chime/internal/engine/scheduler"
)

// Backends.
const (
	BackendSQLite   = "sqlite"
	BackendMySQL    = "mysql"
	BackendPostgres = "postgres"
)

// The nodes' defaults for --lease and --lock-ttl, which the fault windows
// and the length of a stop assume when Config.Lease and Config.LockTTL are
// not set (chaos then passes neither flag to the nodes). They are chime's
// own: the nodes are `chime serve` processes, assembled by chime.New.
const (
	DefaultNodeLease   = executor.DefaultLease
	DefaultNodeLockTTL = scheduler.DefaultLockTTL
)

// DefaultLongShare is the share of timers with long actions.
const DefaultLongShare = 0.05

// Defaults of Config (and of the flags of `chime chaos`).
const (
	DefaultNodes        = 3
	DefaultTimers       = 300
	DefaultDuration     = 60 * time.Second
	DefaultFaultEvery   = 8 * time.Second
	DefaultWarmup       = 5 * time.Second
	DefaultLookahead    = 2 * time.Minute // the nodes' --lookahead
	DefaultMaxSettle    = 150 * time.Second
	DefaultKillPause    = 3 * time.Second
	DefaultNodeLogLevel = "info"
)

// Long actions: the receiver holds each callback of a long timer open for
// a time uniform in [LongHoldMin, LongHoldMax] before it answers 200. Long
// timers fire every 30 s (no more often than their hold, so their fires do
// not overlap each other) with a timeout of LongTimeout.
const (
	LongHoldMin = 12 * time.Second
	LongHoldMax = 20 * time.Second
	LongTimeout = 40 * time.Second
)

// Fault lengths.
const (
	StallMin   = 6 * time.Second  // a stall freezes the store at least this long
	StallMax   = 14 * time.Second // and at most this long (uniform)
	SkewOffset = 5 * time.Second  // a skewed node's clock is this far off (either sign)
	SkewMin    = 10 * time.Second // a node stays skewed at least this long
	SkewMax    = 20 * time.Second // and at most this long (uniform)
	// A partition cuts a node off at least PartitionMin, at most
	// PartitionMax (uniform).
	PartitionMin = 5 * time.Second
	PartitionMax = 20 * time.Second
	// ClockOffsetEnv shifts a node's clock by a Go duration (test only).
	ClockOffsetEnv = "CHIME_TEST_CLOCK_OFFSET"
	// nodeShutdownTimeout is the nodes' --shutdown-timeout.
	nodeShutdownTimeout = 5 * time.Second
)

// Config says what to run. Zero fields take the defaults of Defaults.
type Config struct {
	Backend string // sqlite (default), mysql or postgres
	// DB is the server of the mysql backend (mysql://user:pass@host:port/)
	// or of the postgres backend (postgres://user:pass@host:port/db?…);
	// a fresh database is created on it.
	DB string
	// Redis is the Redis URL of the mysql and postgres backends
	// (redis://host:port/N).
	Redis string
	// RedisFlush empties the Redis DB first (it must be chaos's own).
	RedisFlush bool
	// Coordination is the nodes' --coordination on mysql and postgres:
	// CoordinationRedis (the default: the slice index, locks and elections
	// in Redis) or CoordinationDB (lease rows in the database; the nodes
	// get no --redis, and Redis is neither needed nor used).
	Coordination string
	// RedisHA, when set, has chaos start a highly available Redis of its
	// own on loopback instead of using Redis: RedisHASentinel (a primary, a
	// replica and three Sentinels) or RedisHACluster (three primaries with
	// a replica each), as the failover tests start them
	// (internal/base/servers). It enables the redis-failover fault.
	RedisHA string
	// DBHA, when set (postgres only), has chaos start a PostgreSQL primary
	// with a synchronous streaming standby of its own on loopback instead
	// of using DB, the nodes given both hosts with
	// target_session_attrs=read-write. It enables the db-failover fault.
	DBHA bool
	// Bin is the chime binary to start (default: this executable).
	Bin string
	// AltBin, when set, is a second chime binary: every other node (the
	// 2nd, the 4th…) runs it, restarts included, so that one cluster runs
	// two versions as in a rolling upgrade. Both must take the serve flags
	// chaos passes.
	AltBin string

	Nodes       int           // node processes (default DefaultNodes)
	Timers      int           // timers (default DefaultTimers)
	Duration    time.Duration // fault phase (default DefaultDuration)
	FaultEvery  time.Duration // mean interval between faults (default DefaultFaultEvery)
	Warmup      time.Duration // before the first fault (default DefaultWarmup)
	Settle      time.Duration // least settle time after the faults (default lease+lock TTL+5s)
	MaxSettle   time.Duration // longest wait for late fires (default 150s)
	FaultWindow time.Duration // fires this long after a fault count as during it (default lease+lock TTL+2s)
	KillPause   time.Duration // longest pause before a killed node restarts (default 3s)

	// LockTTL and Lease are passed to the nodes as --lock-ttl and --lease
	// when set; zero leaves the nodes' defaults, and the fault windows
	// assume DefaultNodeLockTTL and DefaultNodeLease.
	LockTTL   time.Duration
	Lease     time.Duration
	Lookahead time.Duration // --lookahead of the nodes (default 2m)

	// LongShare is the share of timers with long actions (0:
	// DefaultLongShare; negative: none).
	LongShare float64

	RedisRestartCmd string // shell command restarting Redis; empty: no such fault
	DBRestartCmd    string // shell command restarting the database; empty: no such fault
	// DBStallCmd and DBResumeCmd freeze and unfreeze the database server
	// (mysql, postgres; SIGSTOP and SIGCONT of its processes). SQLite needs
	// neither: chaos holds the file's write lock itself.
	DBStallCmd  string
	DBResumeCmd string
	// Faults lists the fault kinds to inject (kill, stop, redis, db,
	// stall, skew, partition); empty: every kind that is possible.
	Faults []string
	// FaultsFirst are injected first, in this order, whatever the
	// duration; then random ones of Faults.
	FaultsFirst []string

	WorkDir      string // node data and logs (default: a temp dir, removed if the run passed)
	Keep         bool   // keep the work dir and the database
	Seed         uint64 // random seed (default: from the clock)
	NodeLogLevel string // --log-level of the nodes (default info)
	Logger       *slog.Logger
}

// lease is the nodes' lease: Lease, or their default.
func (c *Config) lease() time.Duration {
	if c.Lease > 0 {
		return c.Lease
	}
	return DefaultNodeLease
}

// lockTTL is the nodes' lock TTL: LockTTL, or their default.
func (c *Config) lockTTL() time.Duration {
	if c.LockTTL > 0 {
		return c.LockTTL
	}
	return DefaultNodeLockTTL
}

// The coordination modes of Config.Coordination.
const (
	CoordinationRedis = "redis"
	CoordinationDB    = "db"
)

// The highly available Redis deployments of Config.RedisHA.
const (
	RedisHASentinel = "sentinel"
	RedisHACluster  = "cluster"
)

// serverDB reports whether the backend is a server database.
func (c *Config) serverDB() bool {
	return c.Backend == BackendMySQL || c.Backend == BackendPostgres
}

// withRedis reports whether the nodes coordinate in Redis: a server
// database and not --coordination db.
func (c *Config) withRedis() bool {
	return c.serverDB() && c.Coordination != CoordinationDB
}

// canStall reports whether the stall fault is possible.
func (c *Config) canStall() bool {
	return c.Backend == BackendSQLite || (c.DBStallCmd != "" && c.DBResumeCmd != "")
}

// Defaults fills the zero fields of c.
func (c *Config) Defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.Backend == "" {
		c.Backend = BackendSQLite
	}
	if c.Nodes <= 0 {
		c.Nodes = DefaultNodes
	}
	if c.Timers <= 0 {
		c.Timers = DefaultTimers
	}
	if c.LongShare == 0 {
		c.LongShare = DefaultLongShare
	}
	def(&c.Duration, DefaultDuration)
	def(&c.FaultEvery, DefaultFaultEvery)
	def(&c.Warmup, DefaultWarmup)
	def(&c.Lookahead, DefaultLookahead)
	def(&c.Settle, c.lease()+c.lockTTL()+5*time.Second)
	def(&c.MaxSettle, DefaultMaxSettle)
	def(&c.FaultWindow, c.lease()+c.lockTTL()+2*time.Second)
	def(&c.KillPause, DefaultKillPause)
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.NodeLogLevel == "" {
		c.NodeLogLevel = DefaultNodeLogLevel
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.Faults) == 0 {
		c.Faults = []string{FaultKill}
		if pauseSupported {
			c.Faults = append(c.Faults, FaultPause)
		}
		if c.RedisRestartCmd != "" && c.withRedis() && c.RedisHA == "" {
			c.Faults = append(c.Faults, FaultRedis)
		}
		if c.DBRestartCmd != "" && c.serverDB() && !c.DBHA {
			c.Faults = append(c.Faults, FaultDB)
		}
		if c.RedisHA != "" {
			c.Faults = append(c.Faults, FaultRedisFailover)
		}
		if c.DBHA {
			c.Faults = append(c.Faults, FaultDBFailover)
		}
		if c.canStall() && !c.DBHA {
			c.Faults = append(c.Faults, FaultStall)
		}
		c.Faults = append(c.Faults, FaultSkew)
		if c.serverDB() && c.RedisHA == "" && !c.DBHA {
			c.Faults = append(c.Faults, FaultPartition)
		}
	}
}

// partitions reports whether the partition fault may be injected: the
// nodes then reach the servers through proxies.
func (c *Config) partitions() bool {
	return slicesContain(c.Faults, FaultPartition) || slicesContain(c.FaultsFirst, FaultPartition)
}

func (c *Config) validate() error {
	switch c.Backend {
	case BackendSQLite:
		if c.Coordination != "" || c.RedisHA != "" || c.DBHA {
			return errors.New("chaos: --coordination, --redis-ha and --db-ha need a server backend (mysql, postgres): SQLite nodes coordinate with file locks")
		}
	case BackendMySQL, BackendPostgres:
		if c.DB == "" && !c.DBHA {
			return fmt.Errorf("chaos: the %s backend needs --db (or --db-ha on postgres)", c.Backend)
		}
		if c.DBHA && c.Backend != BackendPostgres {
			return errors.New("chaos: --db-ha: chaos starts a PostgreSQL primary and standby; MySQL/MariaDB fail over behind a proxy (docs/cluster.md)")
		}
	default:
		return fmt.Errorf("chaos: unknown backend %q (sqlite, mysql or postgres)", c.Backend)
	}
	switch c.Coordination {
	case "", CoordinationRedis:
		if c.serverDB() && c.Redis == "" && c.RedisHA == "" {
			return fmt.Errorf("chaos: the %s backend with --coordination redis needs --redis redis://… or --redis-ha (or --coordination db)", c.Backend)
		}
	case CoordinationDB:
		if c.Redis != "" || c.RedisHA != "" {
			return errors.New("chaos: --coordination db: the nodes take no Redis; drop --redis and --redis-ha")
		}
	default:
		return fmt.Errorf("chaos: --coordination %q: want redis or db", c.Coordination)
	}
	switch c.RedisHA {
	case "", RedisHASentinel, RedisHACluster:
	default:
		return fmt.Errorf("chaos: --redis-ha %q: want sentinel or cluster", c.RedisHA)
	}
	if c.RedisHA != "" && c.Redis != "" {
		return errors.New("chaos: --redis-ha starts a Redis of chaos's own: drop --redis")
	}
	if c.LongShare > 1 {
		return fmt.Errorf("chaos: long share %v: want at most 1", c.LongShare)
	}
	for _, k := range append(slicesClone(c.Faults), c.FaultsFirst...) {
		switch k {
		case FaultKill, FaultSkew:
		case FaultPartition:
			if !c.serverDB() {
				return errors.New("chaos: fault partition needs a backend with servers (mysql, postgres): SQLite has no network to cut")
			}
			if c.DBHA || c.RedisHA != "" {
				return errors.New("chaos: fault partition needs one-server URLs: not with --db-ha or --redis-ha")
			}
			if _, err := serverAddr(c.DB, c.Backend); err != nil {
				return fmt.Errorf("chaos: fault partition: --db: %w", err)
			}
			if c.withRedis() {
				if _, err := serverAddr(c.Redis, "redis"); err != nil {
					return fmt.Errorf("chaos: fault partition: --redis: %w", err)
				}
			}
		case FaultRedisFailover:
			if c.RedisHA == "" {
				return errors.New("chaos: fault redis-failover needs --redis-ha sentinel or cluster")
			}
		case FaultDBFailover:
			if !c.DBHA {
				return errors.New("chaos: fault db-failover needs --db-ha (postgres)")
			}
		case FaultPause:
			if !pauseSupported {
				return errors.New("chaos: fault stop needs SIGSTOP (Unix)")
			}
		case FaultRedis:
			if c.RedisRestartCmd == "" || !c.withRedis() || c.RedisHA != "" {
				return errors.New("chaos: fault redis needs Redis coordination on one server (mysql, postgres, no --redis-ha) and a Redis restart command")
			}
		case FaultDB:
			if c.DBRestartCmd == "" || c.DBHA {
				return errors.New("chaos: fault db needs a database restart command (and no --db-ha)")
			}
		case FaultStall:
			if !c.canStall() || c.DBHA {
				return errors.New("chaos: fault stall needs --db-stall-cmd and --db-resume-cmd (mysql, postgres; no --db-ha)")
			}
		default:
			return fmt.Errorf("chaos: unknown fault %q (kill, stop, redis, db, stall, skew, partition, redis-failover, db-failover)", k)
		}
	}
	all := append(slicesClone(c.Faults), c.FaultsFirst...)
	if c.Nodes < 2 && slicesContain(all, FaultKill, FaultPause, FaultSkew, FaultPartition) {
		return errors.New("chaos: node faults need at least 2 nodes")
	}
	return nil
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func slicesContain(list []string, any ...string) bool {
	for _, a := range list {
		for _, b := range any {
			if a == b {
				return true
			}
		}
	}
	return false
}

// cluster is a running chaos set-up.
type cluster struct {
	cfg    Config
	log    *slog.Logger
	rng    *mrand.Rand
	nodes  []*node
	recv   *receiver
	sqlite string // the SQLite file of the sqlite backend
	// partitionTargets are the targets of the next partitions (see
	// nextPartitionTarget).
	partitionTargets []string

	// ha holds chaos's own highly available servers (Config.RedisHA,
	// Config.DBHA).
	ha *haServers

	mu      sync.Mutex
	stalled bool // the database is frozen by a stall command: resume it on the way out
}

// Run runs a chaos test and returns its report. The error is about the
// set-up (a node that does not start, a server that does not answer); a
// run that breaks a guarantee returns a report whose OK is false.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg.Defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if cfg.Bin == "" {
		if cfg.Bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("chaos: find the chime binary: %w", err)
		}
	}
	workDir := cfg.WorkDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "chime-chaos-"); err != nil {
			return nil, fmt.Errorf("chaos: work dir: %w", err)
		}
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: work dir: %w", err)
	}
	keep := cfg.Keep
	defer func() {
		if keep || err != nil || (rep != nil && !rep.OK()) {
			log.Info("chaos: work dir kept", "dir", workDir)
			return
		}
		os.RemoveAll(workDir)
	}()

	c := &cluster{cfg: cfg, log: log, rng: mrand.New(mrand.NewPCG(cfg.Seed, cfg.Seed>>1|1))}
	dsn, extra := "", []string{}
	if cfg.RedisHA != "" || cfg.DBHA {
		c.ha = &haServers{h: newHarness(workDir)}
		defer c.ha.h.cleanup()
		if err := c.ha.start(cfg); err != nil {
			return nil, err
		}
		if cfg.RedisHA != "" {
			cfg.Redis = c.ha.redisURL()
			c.cfg.Redis = cfg.Redis
		}
	}
	if cfg.Coordination != "" {
		extra = append(extra, "--coordination", cfg.Coordination)
	}
	switch cfg.Backend {
	case BackendSQLite:
		c.sqlite = filepath.Join(workDir, "chime.db")
		dsn = "sqlite://" + c.sqlite
		extra = append(extra, "--file-locks")
	case BackendPostgres, BackendMySQL:
		if cfg.DBHA {
			dsn = c.ha.pg.DSN(haDatabase)
			break
		}
		fresh := freshMySQL
		if cfg.Backend == BackendPostgres {
			fresh = freshPostgres
		}
		var drop func()
		dsn, drop, err = fresh(ctx, cfg.DB)
		if err != nil {
			return nil, err
		}
		defer func() {
			if !keep && err == nil && rep != nil && rep.OK() {
				drop()
			}
		}()
		if cfg.RedisFlush && cfg.withRedis() && cfg.RedisHA == "" {
			if err := flushRedis(ctx, cfg.Redis); err != nil {
				return nil, err
			}
		}
	}
	if cfg.LockTTL > 0 {
		extra = append(extra, "--lock-ttl", cfg.LockTTL.String())
	}
	if cfg.Lease > 0 {
		extra = append(extra, "--lease", cfg.Lease.String())
	}
	log.Info("chaos: start", "backend", cfg.Backend, "db", redact(dsn), "coordination", cfg.Coordination,
		"redis_ha", cfg.RedisHA, "db_ha", cfg.DBHA, "nodes", cfg.Nodes, "timers", cfg.Timers,
		"duration", cfg.Duration, "fault_every", cfg.FaultEvery, "faults", cfg.Faults, "faults_first", cfg.FaultsFirst,
		"lease", cfg.lease(), "lock_ttl", cfg.lockTTL(), "long_share", max(cfg.LongShare, 0),
		"seed", cfg.Seed, "work_dir", workDir, "bin", cfg.Bin, "alt_bin", cfg.AltBin)

	defer c.closeProxies() // after the nodes have stopped (deferred below)
	for i := range cfg.Nodes {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("chaos-n%d", i+1)
		bin := cfg.Bin
		if cfg.AltBin != "" && i%2 == 1 {
			bin = cfg.AltBin
		}
		n := &node{
			name: name, addr: fmt.Sprintf("127.0.0.1:%d", port), bin: bin,
			logPath: filepath.Join(workDir, name+".log"),
		}
		c.nodes = append(c.nodes, n)
		nodeDSN, nodeRedis := dsn, cfg.Redis
		if cfg.partitions() {
			if nodeDSN, nodeRedis, err = n.startProxies(dsn, cfg.Redis, cfg.Backend); err != nil {
				return nil, err
			}
		}
		n.args = append([]string{"serve", "--listen", n.addr, "--db", nodeDSN,
			"--data-dir", filepath.Join(workDir, name), "--node-id", name,
			"--lookahead", cfg.Lookahead.String(), "--shutdown-timeout", nodeShutdownTimeout.String(),
			"--log-level", cfg.NodeLogLevel}, extra...)
		if cfg.withRedis() {
			n.args = append(n.args, "--redis", nodeRedis)
		}
	}
	// The receiver starts after c.nodes is complete: it reads it to find
	// the sender of a connection.
	if c.recv, err = startReceiver(); err != nil {
		return nil, err
	}
	defer c.recv.close()
	defer c.stopAll()
	defer c.unstall() // first of the three: a frozen database is let go before the nodes stop
	// The first node migrates the schema; the others start after it.
	for i, n := range c.nodes {
		if err := n.start(nil); err != nil {
			return nil, err
		}
		if i == 0 {
			if err := n.waitReady(ctx, 60*time.Second); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range c.nodes[1:] {
		if err := n.waitReady(ctx, 60*time.Second); err != nil {
			return nil, err
		}
	}

	start := time.Now().Add(cfg.Warmup + 2*time.Second) // timers take a moment to create
	faultEnd := start.Add(cfg.Duration)
	timers, err := c.createTimers(ctx, start, faultEnd)
	if err != nil {
		return nil, err
	}
	if d := time.Until(start); d > 0 {
		if err := clock.Sleep(ctx, nil, d); err != nil {
			return nil, err
		}
	}
	faults := c.injectFaults(ctx, faultEnd)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	settleStart := time.Now()
	if err := c.settle(ctx, timers, faultEnd); err != nil {
		return nil, err
	}
	fetchStart := time.Now()
	runs, err := c.fetchRuns(ctx, timers)
	if err != nil {
		return nil, err
	}
	calls, bad := c.recv.snapshot()
	rep = &Report{
		Backend: cfg.Backend, Nodes: cfg.Nodes, Timers: len(timers), RedisHA: cfg.RedisHA, DBHA: cfg.DBHA,
		Start: start.UTC(), FaultEnd: faultEnd.UTC(), SettledMS: ms(time.Since(settleStart)),
		FaultWindow: cfg.FaultWindow.String(), Lease: cfg.lease().String(), LockTTL: cfg.lockTTL().String(),
		NodeDefaults: cfg.Lease <= 0 && cfg.LockTTL <= 0, WorkDir: workDir, Seed: cfg.Seed,
	}
	switch {
	case cfg.Coordination != "":
		rep.Coordination = cfg.Coordination
	case cfg.serverDB():
		rep.Coordination = CoordinationRedis
	}
	for _, t := range timers {
		if t.Long {
			rep.LongTimers++
		}
	}
	in := checkInput{Timers: timers, Calls: calls, Bad: bad, Runs: runs, FaultEnd: faultEnd,
		Grace: time.Second, Faults: faults, FaultWindow: cfg.FaultWindow,
		RunsFetched: fetchStart, Snapshot: time.Now()}
	if err := check(in, rep); err != nil {
		return nil, err
	}
	if !rep.OK() {
		log.Warn("chaos: guarantees broken", "checks", rep.Failures(), "node_logs", filepath.Join(workDir, "*.log"))
	}
	return rep, nil
}

// stopAll stops every node (SIGTERM, then SIGKILL).
func (c *cluster) stopAll() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() {
			if err := n.stop(10 * time.Second); err != nil {
				c.log.Warn("chaos: stop node", "node", n.name, "err", err)
			}
		})
	}
	wg.Wait()
}

// base returns the API base URL of a live, unpaused, unskewed node, starting the
// search at node i.
func (c *cluster) base(i int) string {
	for j := range c.nodes {
		n := c.nodes[(i+j)%len(c.nodes)]
		n.mu.Lock()
		paused, skewed := n.paused, n.skewed
		n.mu.Unlock()
		if n.alive() && !paused && !skewed {
			return "http://" + n.addr
		}
	}
	return "http://" + c.nodes[0].addr
}

// isLong reports whether the i-th timer has a long action: share of them,
// spread evenly.
func isLong(i int, share float64) bool {
	if share <= 0 {
		return false
	}
	return int(float64(i+1)*share) > int(float64(i)*share)
}

// specFor returns the schedule of the i-th timer: every second, every
// three seconds, @every 2s, a one-shot within the fault phase, or once a
// minute; for a long timer every 30 s (@every 30s or */30, alternately).
func (c *cluster) specFor(i int, long bool, start, end time.Time) string {
	if long {
		if int(float64(i)*c.cfg.LongShare)%2 == 0 {
			return "@every 30s"
		}
		return "*/30 * * * * *"
	}
	switch i % 10 {
	case 0, 1, 2:
		return "* * * * * *"
	case 3, 4, 5:
		return "*/3 * * * * *"
	case 6, 7:
		return "@every 2s"
	case 8:
		span := max(end.Sub(start)-4*time.Second, time.Second)
		at := start.Add(2*time.Second + time.Duration(c.rng.Int64N(int64(span))))
		return "@at " + at.UTC().Truncate(time.Second).Format(time.RFC3339)
	default:
		return fmt.Sprintf("%d * * * * *", (i*7)%60)
	}
}

// createTimers creates cfg.Timers HTTP timers through the nodes' API.
func (c *cluster) createTimers(ctx context.Context, start, end time.Time) ([]timerSpec, error) {
	out := make([]timerSpec, 0, c.cfg.Timers)
	began := time.Now()
	for i := range c.cfg.Timers {
		long := isLong(i, c.cfg.LongShare)
		spec := c.specFor(i, long, start, end)
		target := c.recv.url
		if long {
			target = c.recv.longURL
		}
		body := map[string]any{
			"app": "chaos", "name": fmt.Sprintf("t%04d", i), "schedule": spec,
			"action": map[string]any{"type": "http", "http": map[string]any{"method": "POST", "url": target}},
		}
		if long {
			body["timeout"] = LongTimeout.String()
		}
		var tm timerResp
		var err error
		for try := range 3 {
			if err = callAPI(ctx, http.MethodPost, c.base(i+try)+"/api/v1/timers", body, &tm); err == nil {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("chaos: create timer %d: %w", i, err)
		}
		out = append(out, timerSpec{ID: tm.ID, Spec: spec, CreatedAt: tm.CreatedAt, Long: long})
	}
	c.log.Info("chaos: timers created", "timers", len(out), "took", time.Since(began).Round(time.Millisecond))
	return out, nil
}

// settle waits at least cfg.Settle, then until every expected fire has
// been received or cfg.MaxSettle has passed.
func (c *cluster) settle(ctx context.Context, timers []timerSpec, faultEnd time.Time) error {
	c.reviveAll(ctx)
	began := time.Now()
	if err := clock.Sleep(ctx, nil, c.cfg.Settle); err != nil {
		return err
	}
	for time.Since(began) < c.cfg.MaxSettle {
		calls, _ := c.recv.snapshot()
		got := map[fireKey]bool{}
		for _, cb := range calls {
			got[fireKey{cb.TimerID, cb.ScheduledAt.UnixNano()}] = true
		}
		missing := 0
		for _, t := range timers {
			s, err := parseAnchored(t)
			if err != nil {
				return err
			}
			f := s.Next(t.CreatedAt.Add(time.Second))
			for n := 0; n < maxFiresPerTimer && !f.IsZero() && !f.After(faultEnd); n++ {
				if !got[fireKey{t.ID, f.UnixNano()}] {
					missing++
				}
				f = s.Next(f)
			}
		}
		if missing == 0 {
			c.log.Info("chaos: settled", "took", time.Since(began).Round(time.Millisecond))
			return nil
		}
		c.log.Info("chaos: settling", "fires_not_received", missing, "elapsed", time.Since(began).Round(time.Second))
		if err := clock.Sleep(ctx, nil, 2*time.Second); err != nil {
			return err
		}
	}
	c.log.Warn("chaos: fires still missing after the longest settle time", "max_settle", c.cfg.MaxSettle)
	return nil
}

// fetchRuns reads every timer's runs through the API.
func (c *cluster) fetchRuns(ctx context.Context, timers []timerSpec) (map[string][]runResp, error) {
	out := make(map[string][]runResp, len(timers))
	for i, t := range timers {
		var runs []runResp
		var err error
		for try := range 3 {
			if runs, err = listRuns(ctx, c.base(i+try), t.ID); err == nil {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("chaos: runs of timer %s: %w", t.ID, err)
		}
		out[t.ID] = runs
	}
	return out, nil
}
