// Package server assembles a whole chime node — store, slice index, locks,
// engine, REST API, web UI and metrics — from a Config, and runs it until
// its context ends. `chime serve` is a thin flag layer over it.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/chimehq/chime/api"
	"github.com/chimehq/chime/engine"
	"github.com/chimehq/chime/executor"
	"github.com/chimehq/chime/index"
	"github.com/chimehq/chime/index/memindex"
	"github.com/chimehq/chime/lock"
	"github.com/chimehq/chime/lock/memlock"
	"github.com/chimehq/chime/metrics"
	"github.com/chimehq/chime/store/sqlstore"
)

// Config is a node's configuration. The zero value of each field means its
// default (see the flags of `chime serve`).
type Config struct {
	Listen  string // API address, default 127.0.0.1:8080
	DB      string // store DSN, default sqlite://./chime-data/chime.db
	Redis   string // redis://… for the cluster index and locks; empty: in process
	DataDir string // node id file, pid and log files; default ./chime-data
	NodeID  string // default: generated once and kept in DataDir/node-id

	Buckets         int
	Lookahead       time.Duration
	PoolSize        int
	LockTTL         time.Duration
	Lease           time.Duration
	ShutdownTimeout time.Duration // default 30s
	AllowShell      bool

	DBMaxOpenConns int
	DBMaxIdleConns int

	// Runners adds action runners (e.g. handlers) to the defaults.
	Runners map[string]executor.Runner
	// HandlerExists tells the API which handler names exist.
	HandlerExists func(name string) bool

	Logger *slog.Logger
	// Ready, if set, receives the API's bound address once it listens.
	Ready func(addr string)
}

func (c *Config) defaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.DataDir == "" {
		c.DataDir = "chime-data"
	}
	if c.DB == "" {
		c.DB = "sqlite://" + filepath.ToSlash(filepath.Join(".", c.DataDir, "chime.db"))
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// NodeID returns the configured node id, or the one kept in dataDir,
// creating it on first use.
func NodeID(configured, dataDir string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	path := filepath.Join(dataDir, "node-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	}
	host, _ := os.Hostname()
	var r [4]byte
	_, _ = rand.Read(r[:])
	id := fmt.Sprintf("%s-%s", host, hex.EncodeToString(r[:]))
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	return id, nil
}

// Run runs a node until ctx ends, then shuts it down gracefully: the API
// stops accepting, the engine stops dispatching and hands its slices over,
// in-flight actions finish within ShutdownTimeout, and the store is closed.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	log := cfg.Logger
	nodeID, err := NodeID(cfg.NodeID, cfg.DataDir)
	if err != nil {
		return err
	}
	st, err := sqlstore.Open(ctx, cfg.DB, sqlstore.Options{MaxOpenConns: cfg.DBMaxOpenConns, MaxIdleConns: cfg.DBMaxIdleConns})
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()

	buckets := cfg.Buckets
	var (
		idx     index.Index
		locker  lock.Locker
		elector lock.Elector
		closer  = func() error { return nil }
	)
	if cfg.Redis != "" {
		idx, locker, elector, closer, err = redisBackends(ctx, cfg.Redis, buckets)
		if err != nil {
			return err
		}
	} else {
		if buckets <= 0 {
			buckets = 4
		}
		idx = memindex.New(buckets)
		locker = memlock.NewLocker(nil)
		elector = memlock.NewElector(nil)
	}
	defer closer()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	eng, err := engine.New(engine.Config{
		Store: st, Index: idx, Locker: locker, Elector: elector,
		NodeID: nodeID, Addr: ln.Addr().String(), Runners: cfg.Runners,
		Lookahead: cfg.Lookahead, PoolSize: cfg.PoolSize, LockTTL: cfg.LockTTL, Lease: cfg.Lease,
		Metrics: m, Logger: log,
	})
	if err != nil {
		ln.Close()
		return err
	}
	if err := eng.Start(ctx); err != nil {
		ln.Close()
		return fmt.Errorf("start engine: %w", err)
	}
	srv := &http.Server{
		Handler: api.New(api.Config{
			Store: st, Engine: eng, Gatherer: reg, Logger: log,
			AllowShell: cfg.AllowShell, HandlerExists: cfg.HandlerExists,
		}).Handler(),
		ReadHeaderTimeout: 10 * time.Second,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("chime serving", "listen", ln.Addr().String(), "node", nodeID, "db", redact(cfg.DB), "redis", redact(cfg.Redis))
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		log.Error("api server", "err", err)
	}
	log.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if serr := eng.Shutdown(sctx); serr != nil {
		log.Warn("engine shutdown", "err", serr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// redact hides the password of a DSN for logs.
func redact(dsn string) string {
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
