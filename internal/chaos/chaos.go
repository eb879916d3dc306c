// Package chaos runs a chime cluster under faults and checks its delivery
// guarantees (docs/guarantees.md).
//
// Run starts nodes of a chime binary (`chime serve`) on loopback, over a
// shared SQLite file with file locks or over MySQL/MariaDB and Redis, an
// in-process HTTP receiver, and a few hundred HTTP timers with mixed
// schedules. For Config.Duration it injects faults one after the other at
// random intervals: SIGKILL a node and restart it, SIGSTOP a node longer
// than its lease and SIGCONT it, restart Redis, restart the database (the
// last two by shell commands). After a settle phase without faults it
// compares every expected (timer, instant) with the callbacks received and
// the runs in the store, and returns a Report: missed fires, duplicate
// deliveries and executions, and the fire-delay distribution outside and
// during faults.
package chaos

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// Backends.
const (
	BackendSQLite = "sqlite"
	BackendMySQL  = "mysql"
)

// Config says what to run. Zero fields take the defaults of Defaults.
type Config struct {
	Backend string // sqlite (default) or mysql
	// DB is the MySQL/MariaDB server for the mysql backend
	// (mysql://user:pass@host:port/); a fresh database is created on it.
	DB string
	// Redis is the Redis URL of the mysql backend (redis://host:port/N).
	Redis string
	// RedisFlush empties the Redis DB first (it must be chaos's own).
	RedisFlush bool
	// Bin is the chime binary to start (default: this executable).
	Bin string

	Nodes       int           // node processes (default 3)
	Timers      int           // timers (default 300)
	Duration    time.Duration // fault phase (default 60s)
	FaultEvery  time.Duration // mean interval between faults (default 8s)
	Warmup      time.Duration // before the first fault (default 5s)
	Settle      time.Duration // least settle time after the faults (default lease+lock TTL+5s)
	MaxSettle   time.Duration // longest wait for late fires (default 150s)
	FaultWindow time.Duration // fires this long after a fault count as during it (default lease+lock TTL+2s)
	KillPause   time.Duration // longest pause before a killed node restarts (default 3s)

	LockTTL   time.Duration // --lock-ttl of the nodes (default 3s)
	Lease     time.Duration // --lease of the nodes (default 5s)
	Lookahead time.Duration // --lookahead of the nodes (default 2m)

	RedisRestartCmd string // shell command restarting Redis; empty: no such fault
	DBRestartCmd    string // shell command restarting the database; empty: no such fault
	// Faults lists the fault kinds to inject (kill, stop, redis, db);
	// empty: every kind that is possible.
	Faults []string

	WorkDir      string // node data and logs (default: a temp dir, removed if the run passed)
	Keep         bool   // keep the work dir and the database
	Seed         uint64 // random seed (default: from the clock)
	NodeLogLevel string // --log-level of the nodes (default info)
	Logger       *slog.Logger
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
		c.Nodes = 3
	}
	if c.Timers <= 0 {
		c.Timers = 300
	}
	def(&c.Duration, 60*time.Second)
	def(&c.FaultEvery, 8*time.Second)
	def(&c.Warmup, 5*time.Second)
	def(&c.LockTTL, 3*time.Second)
	def(&c.Lease, 5*time.Second)
	def(&c.Lookahead, 2*time.Minute)
	def(&c.Settle, c.Lease+c.LockTTL+5*time.Second)
	def(&c.MaxSettle, 150*time.Second)
	def(&c.FaultWindow, c.Lease+c.LockTTL+2*time.Second)
	def(&c.KillPause, 3*time.Second)
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	if c.NodeLogLevel == "" {
		c.NodeLogLevel = "info"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.Faults) == 0 {
		c.Faults = []string{FaultKill}
		if pauseSupported {
			c.Faults = append(c.Faults, FaultPause)
		}
		if c.RedisRestartCmd != "" && c.Backend == BackendMySQL {
			c.Faults = append(c.Faults, FaultRedis)
		}
		if c.DBRestartCmd != "" && c.Backend == BackendMySQL {
			c.Faults = append(c.Faults, FaultDB)
		}
	}
}

func (c *Config) validate() error {
	switch c.Backend {
	case BackendSQLite:
	case BackendMySQL:
		if c.DB == "" || c.Redis == "" {
			return errors.New("chaos: the mysql backend needs --db mysql://… and --redis redis://…")
		}
	default:
		return fmt.Errorf("chaos: unknown backend %q (sqlite or mysql)", c.Backend)
	}
	for _, k := range c.Faults {
		switch k {
		case FaultKill, FaultPause:
		case FaultRedis:
			if c.RedisRestartCmd == "" {
				return errors.New("chaos: fault redis needs a Redis restart command")
			}
		case FaultDB:
			if c.DBRestartCmd == "" {
				return errors.New("chaos: fault db needs a database restart command")
			}
		default:
			return fmt.Errorf("chaos: unknown fault %q (kill, stop, redis, db)", k)
		}
	}
	if c.Nodes < 2 && slicesContain(c.Faults, FaultKill, FaultPause) {
		return errors.New("chaos: node faults need at least 2 nodes")
	}
	return nil
}

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
	cfg   Config
	log   *slog.Logger
	rng   *mrand.Rand
	nodes []*node
	recv  *receiver
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
	switch cfg.Backend {
	case BackendSQLite:
		dsn = "sqlite://" + filepath.Join(workDir, "chime.db")
		extra = append(extra, "--file-locks")
	case BackendMySQL:
		var drop func()
		dsn, drop, err = freshMySQL(ctx, cfg.DB)
		if err != nil {
			return nil, err
		}
		defer func() {
			if !keep && err == nil && rep != nil && rep.OK() {
				drop()
			}
		}()
		if cfg.RedisFlush {
			if err := flushRedis(ctx, cfg.Redis); err != nil {
				return nil, err
			}
		}
		extra = append(extra, "--redis", cfg.Redis)
	}
	log.Info("chaos: start", "backend", cfg.Backend, "db", redact(dsn), "nodes", cfg.Nodes, "timers", cfg.Timers,
		"duration", cfg.Duration, "fault_every", cfg.FaultEvery, "faults", cfg.Faults, "seed", cfg.Seed, "work_dir", workDir)

	if c.recv, err = startReceiver(); err != nil {
		return nil, err
	}
	defer c.recv.close()
	defer c.stopAll()
	for i := range cfg.Nodes {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("chaos-n%d", i+1)
		n := &node{
			name: name, addr: fmt.Sprintf("127.0.0.1:%d", port), bin: cfg.Bin,
			logPath: filepath.Join(workDir, name+".log"),
		}
		n.args = append([]string{"serve", "--listen", n.addr, "--db", dsn,
			"--data-dir", filepath.Join(workDir, name), "--node-id", name,
			"--lock-ttl", cfg.LockTTL.String(), "--lease", cfg.Lease.String(),
			"--lookahead", cfg.Lookahead.String(), "--shutdown-timeout", "5s",
			"--log-level", cfg.NodeLogLevel}, extra...)
		c.nodes = append(c.nodes, n)
	}
	// The first node migrates the schema; the others start after it.
	for i, n := range c.nodes {
		if err := n.start(); err != nil {
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
		if err := sleep(ctx, d); err != nil {
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
	runs, err := c.fetchRuns(ctx, timers)
	if err != nil {
		return nil, err
	}
	calls, bad := c.recv.snapshot()
	rep = &Report{
		Backend: cfg.Backend, Nodes: cfg.Nodes, Timers: len(timers),
		Start: start.UTC(), FaultEnd: faultEnd.UTC(), SettledMS: ms(time.Since(settleStart)),
		FaultWindow: cfg.FaultWindow.String(), WorkDir: workDir,
	}
	in := checkInput{Timers: timers, Calls: calls, Bad: bad, Runs: runs, FaultEnd: faultEnd,
		Grace: time.Second, Faults: faults, FaultWindow: cfg.FaultWindow}
	if err := check(in, rep); err != nil {
		return nil, err
	}
	if !rep.OK() {
		log.Warn("chaos: guarantees broken", "missed", rep.Missed,
			"same_attempt_duplicates", rep.SameAttemptDuplicates, "duplicate_executions", rep.DuplicateExecutions,
			"node_logs", filepath.Join(workDir, "*.log"))
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

// base returns the API base URL of a live, unpaused node, starting the
// search at node i.
func (c *cluster) base(i int) string {
	for j := range c.nodes {
		n := c.nodes[(i+j)%len(c.nodes)]
		n.mu.Lock()
		paused := n.paused
		n.mu.Unlock()
		if n.alive() && !paused {
			return "http://" + n.addr
		}
	}
	return "http://" + c.nodes[0].addr
}

// specFor returns the schedule of the i-th timer: every second, every
// three seconds, @every 2s, a one-shot within the fault phase, or once a
// minute.
func (c *cluster) specFor(i int, start, end time.Time) string {
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
		spec := c.specFor(i, start, end)
		body := map[string]any{
			"app": "chaos", "name": fmt.Sprintf("t%04d", i), "schedule": spec,
			"action": map[string]any{"type": "http", "http": map[string]any{"method": "POST", "url": c.recv.url}},
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
		out = append(out, timerSpec{ID: tm.ID, Spec: spec, CreatedAt: tm.CreatedAt})
	}
	c.log.Info("chaos: timers created", "timers", len(out), "took", time.Since(began).Round(time.Millisecond))
	return out, nil
}

// injectFaults injects faults one after the other until end, and returns
// them.
func (c *cluster) injectFaults(ctx context.Context, end time.Time) []Fault {
	var faults []Fault
	maxFaults := int(c.cfg.Duration/time.Second) + 1 // at most one a second
	for len(faults) < maxFaults {
		wait := c.cfg.FaultEvery/2 + time.Duration(c.rng.Int64N(int64(c.cfg.FaultEvery)+1))
		if time.Now().Add(wait).After(end) {
			break
		}
		if sleep(ctx, wait) != nil {
			break
		}
		kind := c.cfg.Faults[c.rng.IntN(len(c.cfg.Faults))]
		f := c.inject(ctx, kind)
		c.log.Info("chaos: fault", "kind", f.Kind, "node", f.Node, "took", f.End.Sub(f.Start).Round(time.Millisecond), "err", f.Err)
		faults = append(faults, f)
	}
	if d := time.Until(end); d > 0 {
		_ = sleep(ctx, d)
	}
	return faults
}

// inject injects one fault and returns when it is over.
func (c *cluster) inject(ctx context.Context, kind string) Fault {
	f := Fault{Kind: kind, Start: time.Now()}
	var err error
	switch kind {
	case FaultKill:
		n := c.nodes[c.rng.IntN(len(c.nodes))]
		f.Node = n.name
		f.Start = time.Now()
		if err = n.kill(); err == nil {
			_ = sleep(ctx, time.Second+time.Duration(c.rng.Int64N(int64(max(c.cfg.KillPause-time.Second, 0))+1)))
			if err = n.start(); err == nil {
				err = n.waitReady(ctx, 60*time.Second)
			}
		}
	case FaultPause:
		n := c.nodes[c.rng.IntN(len(c.nodes))]
		f.Node = n.name
		f.Start = time.Now()
		if err = n.pause(); err == nil {
			_ = sleep(ctx, c.cfg.Lease+time.Second+time.Duration(c.rng.Int64N(int64(time.Second))))
			err = n.resume()
		}
	case FaultRedis:
		err = c.shell(ctx, c.cfg.RedisRestartCmd)
	case FaultDB:
		err = c.shell(ctx, c.cfg.DBRestartCmd)
	}
	f.End = time.Now()
	if err != nil {
		f.Err = err.Error()
		c.log.Warn("chaos: fault failed", "kind", kind, "node", f.Node, "err", err)
	}
	// A node that a failed fault left down is restarted.
	c.reviveAll(ctx)
	return f
}

// reviveAll resumes paused nodes and restarts exited ones.
func (c *cluster) reviveAll(ctx context.Context) {
	for _, n := range c.nodes {
		if err := n.resume(); err != nil {
			c.log.Warn("chaos: resume node", "node", n.name, "err", err)
		}
		if n.alive() {
			continue
		}
		c.log.Warn("chaos: node down; restarting", "node", n.name, "log", n.logPath)
		if err := n.start(); err != nil {
			c.log.Warn("chaos: restart node", "node", n.name, "err", err)
			continue
		}
		if err := n.waitReady(ctx, 60*time.Second); err != nil {
			c.log.Warn("chaos: restarted node not ready", "node", n.name, "err", err)
		}
	}
}

// shell runs a restart command with sh -c, for at most two minutes.
func (c *cluster) shell(ctx context.Context, command string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", command).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%q: %w: %s", command, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// settle waits at least cfg.Settle, then until every expected fire has
// been received or cfg.MaxSettle has passed.
func (c *cluster) settle(ctx context.Context, timers []timerSpec, faultEnd time.Time) error {
	c.reviveAll(ctx)
	began := time.Now()
	if err := sleep(ctx, c.cfg.Settle); err != nil {
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
		if err := sleep(ctx, 2*time.Second); err != nil {
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

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "chime_chaos_" + hex.EncodeToString(b[:])
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

func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	return u.Redacted()
}
