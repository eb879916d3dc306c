// Package server runs a whole chime node — the node of the Go library
// (store, slice index, locks, engine, handlers) with the REST API, web UI
// and metrics on top — from a Config, until its context ends. `chime serve`
// and `chime cron start` are thin flag layers over it. The node is
// assembled by chime.New, so that the server and the library run the same
// thing.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/api"
	"github.com/chimehq/chime/executor"
	"github.com/chimehq/chime/internal/builtin"
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
	MaxClockSkew    time.Duration // default 1s
	AllowShell      bool
	FileLocks       bool // several processes share one SQLite file (see chime.Config.FileLocks)

	DBMaxOpenConns int
	DBMaxIdleConns int
	// SQLiteSynchronous: "full" (default) or "normal"; see
	// chime.Config.SQLiteSynchronous.
	SQLiteSynchronous string

	// SMTP configures the built-in send_email handler.
	SMTP builtin.SMTPConfig

	// Secrets (issue 12; see docs/security-secrets.md).
	SecretKey    []byte   // --secret-key, decoded: 32 bytes, or nil
	CleanupRoots []string // --cleanup-root: cleanup_files works only inside these
	ShellAllow   []string // --shell-allow: the only commands shell actions may run

	// Runners adds action runners to the defaults.
	Runners map[string]executor.Runner
	// Handlers adds Go handlers to the built-in ones.
	Handlers map[string]chime.Handler
	// HandlerExists, when set, tells the API about handler names that
	// exist beyond the node's registered handlers.
	HandlerExists func(name string) bool

	Logger *slog.Logger
	// Ready, if set, receives the API's bound address once it listens.
	Ready func(addr string)
	// Started, if set, is called once the node runs and the API listens,
	// with the API's bound address and the node's id.
	Started func(addr, nodeID string)
}

func (c *Config) defaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.DataDir == "" {
		c.DataDir = "chime-data"
	}
	if c.DB == "" {
		c.DB = chime.DefaultDB(c.DataDir)
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
func NodeID(configured, dataDir string) (string, error) { return chime.NodeID(configured, dataDir) }

// Run runs a node until ctx ends, then shuts it down gracefully: the API
// stops accepting, the engine stops dispatching and hands its slices over,
// in-flight actions finish within ShutdownTimeout, and the store is closed.
func Run(ctx context.Context, cfg Config) error {
	cfg.defaults()
	log := cfg.Logger

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	node, err := chime.New(chime.Config{
		DB: cfg.DB, Redis: cfg.Redis, DataDir: cfg.DataDir, NodeID: cfg.NodeID,
		Addr: ln.Addr().String(), AllowShell: cfg.AllowShell, FileLocks: cfg.FileLocks,
		Buckets: cfg.Buckets, Lookahead: cfg.Lookahead, PoolSize: cfg.PoolSize, LockTTL: cfg.LockTTL, Lease: cfg.Lease,
		MaxClockSkew: cfg.MaxClockSkew, DBMaxOpenConns: cfg.DBMaxOpenConns, DBMaxIdleConns: cfg.DBMaxIdleConns,
		SQLiteSynchronous: cfg.SQLiteSynchronous,
		Runners:           cfg.Runners, Registerer: reg, Logger: log,
		SecretKey: cfg.SecretKey, ShellAllow: cfg.ShellAllow,
	})
	if err != nil {
		ln.Close()
		return err
	}
	if err := builtin.Register(node, cfg.SMTP, cfg.CleanupRoots...); err != nil {
		ln.Close()
		node.Shutdown(context.Background())
		return err
	}
	for name, h := range cfg.Handlers {
		node.Handle(name, h)
	}
	if err := node.Start(ctx); err != nil {
		ln.Close()
		node.Shutdown(context.Background())
		return fmt.Errorf("start engine: %w", err)
	}
	exists := node.HandlerExists
	if cfg.HandlerExists != nil {
		exists = func(name string) bool { return node.HandlerExists(name) || cfg.HandlerExists(name) }
	}
	apiHandler := api.New(api.Config{
		Store: node.Store(), Engine: node.Engine(), Gatherer: reg, Logger: log,
		AllowShell: cfg.AllowShell, HandlerExists: exists, ValidateArgs: node.ValidateArgs,
		ShellAllow: cfg.ShellAllow,
	}).Handler()
	srv := &http.Server{
		Handler:           apiHandler,
		ReadHeaderTimeout: 10 * time.Second,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("chime serving", "listen", ln.Addr().String(), "node", node.ID(), "db", chime.Redact(cfg.DB), "redis", chime.Redact(cfg.Redis))
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}
	if cfg.Started != nil {
		cfg.Started(ln.Addr().String(), node.ID())
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
	if serr := node.Shutdown(sctx); serr != nil {
		log.Warn("engine shutdown", "err", serr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
