// Package server runs a whole chime node — the node of the Go library
// (store, slice index, locks, engine, handlers) with the REST API, web UI
// and metrics on top — from a Config, until its context ends. `chime serve`
// and `chime cron start` are thin flag layers over it. The node is
// assembled by chime.New, so that the server and the library run the same
// thing.
package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/app/builtin"
	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/nodeparts"
	"github.com/chimehq/chime/internal/store"
)

// Defaults of the server's own Config fields; the node's are chime's
// (executor.DefaultLease and the others).
const (
	// DefaultListen is Config.Listen's default: loopback only.
	DefaultListen = "127.0.0.1:8080"
	// DefaultShutdownTimeout is Config.ShutdownTimeout's default.
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultHTTPReadTimeout is Config.HTTPReadTimeout's default: how long
	// a client may take to send a request, headers and body.
	DefaultHTTPReadTimeout = 30 * time.Second
	// DefaultHTTPWriteTimeout is Config.HTTPWriteTimeout's default: how
	// long an answer may take, from the end of the request's headers.
	DefaultHTTPWriteTimeout = 60 * time.Second
	// DefaultHTTPIdleTimeout is Config.HTTPIdleTimeout's default: how long
	// a kept-alive connection may wait for its next request.
	DefaultHTTPIdleTimeout = 120 * time.Second
	// DefaultHTTPMaxHeaderBytes is Config.HTTPMaxHeaderBytes' default.
	DefaultHTTPMaxHeaderBytes = 1 << 20
)

// Config is a node's configuration. The zero value of each field means its
// default (see the flags of `chime serve`). The node's fields mean what the
// chime.Config fields of the same names mean.
type Config struct {
	Listen string // API address, default DefaultListen
	DB     string // store DSN, default chime.DefaultDB(DataDir)
	Redis  string // redis://… for the cluster index and locks; empty: in process
	// Coordination is auto (the default), db or redis: chime.ClusterConfig.Coordination.
	Coordination string
	DataDir      string // node id file, pid and log files; default chime.DefaultDataDir
	NodeID       string // default: generated once and kept in DataDir/node-id

	Buckets         int           // default chime.DefaultBuckets, chime.DefaultRedisBuckets with Redis
	Lookahead       time.Duration // default planner.DefaultLookahead
	PlanFires       int           // default planner.DefaultFiresAhead
	PlanAhead       time.Duration // default engine.DefaultPlanAhead
	PoolSize        int           // default executor.DefaultPoolSize
	LockTTL         time.Duration // default scheduler.DefaultLockTTL
	Lease           time.Duration // default executor.DefaultLease
	ShutdownTimeout time.Duration // default DefaultShutdownTimeout
	// The API server's bounds on each connection: zero takes the
	// default (DefaultHTTPReadTimeout, …), a negative value sets none.
	HTTPReadTimeout    time.Duration
	HTTPWriteTimeout   time.Duration
	HTTPIdleTimeout    time.Duration
	HTTPMaxHeaderBytes int
	MaxClockSkew       time.Duration // default engine.DefaultMaxClockSkew
	HistoryKeep        int           // default retention.DefaultKeep; negative: no count limit
	HistoryMaxAge      time.Duration // default retention.DefaultMaxAge; negative: no age limit
	AllowShell         bool
	FileLocks          bool // several processes share one SQLite file (see chime.ClusterConfig.FileLocks)

	DBMaxOpenConns int
	DBMaxIdleConns int
	// SQLiteSynchronous: "full" (default) or "normal"; see
	// chime.DatabaseConfig.SQLiteSynchronous.
	SQLiteSynchronous string

	// Security (see docs/security.md).
	Auth           string // api.AuthOn, AuthOff or AuthAuto (default)
	AdminToken     string
	InsecureNoAuth bool // allow auth off on an address that is not loopback
	MetricsPublic  bool
	AllowedHosts   []string // default api.DefaultAllowedHosts(Listen)
	AllowedOrigins []string
	TLSCert        string
	TLSKey         string
	// Callbacks: the egress policy (package egress) and signing.
	CallbackDeny   []string      // CIDRs denied besides egress.DefaultDeny
	CallbackAllow  []string      // CIDRs allowed even when denied
	SigningOverlap time.Duration // a rotated signing secret keeps signing this long (default 24h)

	// SMTP configures the built-in send_email handler, and the email
	// notifications.
	SMTP builtin.SMTPConfig
	// NotifyBackoff is chime.TestConfig.NotifyBackoff (tests).
	NotifyBackoff time.Duration
	// Clock is chime.TestConfig.Clock: nil is this machine's clock. The
	// command line shifts it by the test-only CHIME_TEST_CLOCK_OFFSET.
	Clock clock.Clock

	// Secrets (docs/security.md).
	SecretKey    []byte   // --secret-key, decoded: 32 bytes, or nil
	CleanupRoots []string // --cleanup-root: cleanup_files works only inside these
	// OutputRoots (--output-root): backup_database and generate_report
	// write files only inside these.
	OutputRoots []string
	ShellAllow  []string // --shell-allow: the only commands shell actions may run
	// BuiltinsApps (--builtins-apps): apps whose write tokens may save
	// timers running the built-ins that act on the node (backup_database,
	// cleanup_files); otherwise only an admin token may.
	BuiltinsApps []string
	// ShellEnvPass (--shell-env-pass): variables of the node's
	// environment shell actions get besides PATH, HOME, LANG and TZ.
	ShellEnvPass []string

	// Runners adds action runners to the defaults.
	Runners map[string]action.Runner
	// Handlers adds Go handlers to the built-in ones.
	Handlers map[string]chime.Handler
	// HandlerExists, when set, tells the API about handler names that
	// exist beyond the node's registered handlers.
	HandlerExists func(name string) bool

	// Version is the build version (chime version), served as the
	// OpenAPI document's info.version.
	Version string

	Logger *slog.Logger
	// Ready, if set, receives the API's bound address once it listens.
	Ready func(addr string)
	// Started, if set, is called once the node runs and the API listens,
	// with the API's bound address and the node's id.
	Started func(addr, nodeID string)
}

func (c *Config) defaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.DataDir == "" {
		c.DataDir = chime.DefaultDataDir
	}
	if c.DB == "" {
		c.DB = chime.DefaultDB(c.DataDir)
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	orDefault := func(d *time.Duration, def time.Duration) {
		switch {
		case *d == 0:
			*d = def
		case *d < 0:
			*d = 0 // http.Server: none
		}
	}
	orDefault(&c.HTTPReadTimeout, DefaultHTTPReadTimeout)
	orDefault(&c.HTTPWriteTimeout, DefaultHTTPWriteTimeout)
	orDefault(&c.HTTPIdleTimeout, DefaultHTTPIdleTimeout)
	if c.HTTPMaxHeaderBytes <= 0 {
		c.HTTPMaxHeaderBytes = DefaultHTTPMaxHeaderBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// ErrConfig marks a configuration that the server refuses to start with
// (the command line exits 2).
var ErrConfig = errors.New("configuration")

// MinAdminTokenLen is the shortest admin token accepted.
const MinAdminTokenLen = 16

// resolveAuth decides the API's authentication mode from the configured
// one, the address the API listens on and whether any token exists, and
// refuses what would leave the API open to the network or closed to
// everybody.
func resolveAuth(ctx context.Context, cfg Config, listen string, st store.Tokens) (string, error) {
	host, _, _ := net.SplitHostPort(listen)
	loopback := api.IsLoopback(host)
	mode := strings.ToLower(cfg.Auth)
	if mode == "" {
		mode = api.AuthAuto
	}
	hasTokens, err := st.HasTokens(ctx)
	if err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	canLogIn := cfg.AdminToken != "" || hasTokens
	nobody := fmt.Errorf("%w: authentication is on but no token exists, so nobody could get in: "+
		"set --admin-token (or CHIME_ADMIN_TOKEN) to a secret of at least %d characters", ErrConfig, MinAdminTokenLen)
	exposed := fmt.Errorf("%w: refusing to serve %s without authentication, which lets anyone on the network "+
		"create timers that run actions: set --admin-token (or CHIME_ADMIN_TOKEN), listen on 127.0.0.1, "+
		"or give --insecure-no-auth if something in front of chime authenticates", ErrConfig, listen)
	switch mode {
	case api.AuthOff:
		if !loopback && !cfg.InsecureNoAuth {
			return "", exposed
		}
		return api.AuthOff, nil
	case api.AuthOn:
		if !canLogIn {
			return "", nobody
		}
		return api.AuthOn, nil
	case api.AuthAuto:
		switch {
		case canLogIn:
			return api.AuthOn, nil
		case loopback:
			return api.AuthAuto, nil // on as soon as a token is created
		case cfg.InsecureNoAuth:
			return api.AuthOff, nil
		}
		return "", exposed
	}
	return "", fmt.Errorf("%w: --auth must be on, off or auto, not %q", ErrConfig, cfg.Auth)
}

// loadTLS loads the server's certificate; nil, nil without one.
func loadTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: --tls-cert and --tls-key go together", ErrConfig)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: --tls-cert/--tls-key: %v", ErrConfig, err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
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

	tlsConfig, err := loadTLS(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return err
	}
	if len(cfg.AdminToken) > 0 && len(cfg.AdminToken) < MinAdminTokenLen {
		return fmt.Errorf("%w: --admin-token must be at least %d characters (try: openssl rand -base64 32)", ErrConfig, MinAdminTokenLen)
	}
	policy, err := egress.NewPolicy(cfg.CallbackDeny, cfg.CallbackAllow)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	unlock, err := lockDataDir(cfg.DB, cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	node, err := chime.New(chime.Config{
		DB:         cfg.DB,
		Redis:      cfg.Redis,
		DataDir:    cfg.DataDir,
		Registerer: reg,
		Logger:     log,
		Cluster: chime.ClusterConfig{
			Coordination: cfg.Coordination,
			NodeID:       cfg.NodeID,
			Addr:         ln.Addr().String(),
			FileLocks:    cfg.FileLocks,
			Buckets:      cfg.Buckets,
			LockTTL:      cfg.LockTTL,
			MaxClockSkew: cfg.MaxClockSkew,
		},
		Plan: chime.PlanConfig{
			Lookahead: cfg.Lookahead,
			Fires:     cfg.PlanFires,
			Ahead:     cfg.PlanAhead,
		},
		Actions: chime.ActionsConfig{
			PoolSize: cfg.PoolSize,
			Lease:    cfg.Lease,
			Runners:  cfg.Runners,
		},
		Security: chime.SecurityConfig{
			AllowShell:   cfg.AllowShell,
			SecretKey:    cfg.SecretKey,
			ShellAllow:   cfg.ShellAllow,
			ShellEnvPass: cfg.ShellEnvPass,
			Egress:       policy, // callbacks (docs/callbacks.md)
		},
		Notify: chime.NotifyConfig{
			Email:   &builtin.SendEmail{Config: cfg.SMTP},
			BaseURL: "http://" + ln.Addr().String(),
		},
		History: chime.HistoryConfig{
			Keep:   cfg.HistoryKeep,
			MaxAge: cfg.HistoryMaxAge,
		},
		Database: chime.DatabaseConfig{
			MaxOpenConns:      cfg.DBMaxOpenConns,
			MaxIdleConns:      cfg.DBMaxIdleConns,
			SQLiteSynchronous: cfg.SQLiteSynchronous,
		},
		Test: chime.TestConfig{
			Clock:         cfg.Clock,
			NotifyBackoff: cfg.NotifyBackoff,
		},
	})
	if err != nil {
		ln.Close()
		if errors.Is(err, chime.ErrConfig) {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
		return err
	}
	parts := nodeparts.Of(node)
	authMode, err := resolveAuth(ctx, cfg, ln.Addr().String(), parts.Store)
	if err == nil {
		err = builtin.Register(node, cfg.SMTP, cfg.CleanupRoots...)
	}
	if err == nil {
		err = builtin.RegisterData(node, builtin.DataOptions{OutputRoots: cfg.OutputRoots, SMTP: cfg.SMTP, Egress: policy})
	}
	if err != nil {
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
		if errors.Is(err, engine.ErrNodeIDInUse) {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		if errors.Is(err, engine.ErrCoordinationMismatch) {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
		return fmt.Errorf("start engine: %w", err)
	}
	allowedHosts := cfg.AllowedHosts
	if len(allowedHosts) == 0 {
		allowedHosts = api.DefaultAllowedHosts(ln.Addr().String())
		if host, _, _ := net.SplitHostPort(cfg.Listen); host != "" && !strings.EqualFold(host, "localhost") {
			// A listen name (not an address) is served as given too.
			if _, port, err := net.SplitHostPort(ln.Addr().String()); err == nil && allowedHosts != nil {
				allowedHosts = append(allowedHosts, net.JoinHostPort(host, port))
			}
		}
	}
	exists := node.HandlerExists
	if cfg.HandlerExists != nil {
		exists = func(name string) bool { return node.HandlerExists(name) || cfg.HandlerExists(name) }
	}
	apiHandler := api.New(api.Config{
		Store: parts.Store, Engine: parts.Engine, Clock: parts.Engine.Clock(), Gatherer: reg, Logger: log,
		AllowShell: cfg.AllowShell, HandlerExists: exists, ValidateArgs: node.ValidateArgs,
		Auth: authMode, AdminToken: cfg.AdminToken, MetricsPublic: cfg.MetricsPublic,
		AllowedHosts: allowedHosts, AllowedOrigins: cfg.AllowedOrigins,
		ShellAllow: cfg.ShellAllow, EmailAllowed: emailAllowed(cfg.SMTP),
		NodeHandlers: []string{builtin.BackupDatabaseName, builtin.CleanupFilesName}, BuiltinsApps: cfg.BuiltinsApps,
		WriteTimeout: cfg.HTTPWriteTimeout, RotatingSecrets: parts.Secrets.Rotating,
		Egress: policy, SigningOverlap: cfg.SigningOverlap,
		Series: parts.Series, NodeID: node.ID(), Version: cfg.Version,
	}).Handler()
	srv := newHTTPServer(cfg, apiHandler, tlsConfig)
	log.Info("chime serving", "version", cfg.Version, "listen", ln.Addr().String(), "tls", tlsConfig != nil, "auth", authMode,
		"node", node.ID(), "db", chime.Redact(cfg.DB), "redis", chime.Redact(cfg.Redis), "coordination", node.Coordination())
	log.Info("web UI at "+UIURL(ln.Addr().String(), tlsConfig != nil),
		"stop", fmt.Sprintf("Ctrl-C, or kill %d (SIGINT or SIGTERM: in-flight actions get --shutdown-timeout to finish)", os.Getpid()))
	serveErr := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			serveErr <- srv.ServeTLS(ln, "", "") // HTTP/2 included
			return
		}
		serveErr <- srv.Serve(ln)
	}()
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

// newHTTPServer returns the API's HTTP server, with cfg's bounds on each
// connection (the headers within the read timeout, and at most 10 s).
func newHTTPServer(cfg Config, h http.Handler, tlsConfig *tls.Config) *http.Server {
	header := 10 * time.Second
	if cfg.HTTPReadTimeout > 0 {
		header = min(header, cfg.HTTPReadTimeout)
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: header,
		ReadTimeout:       cfg.HTTPReadTimeout,
		WriteTimeout:      cfg.HTTPWriteTimeout,
		IdleTimeout:       cfg.HTTPIdleTimeout,
		MaxHeaderBytes:    cfg.HTTPMaxHeaderBytes,
		TLSConfig:         tlsConfig,
	}
}

// emailAllowed is the API's check of notify rules' email addresses: the
// recipients smtp may send to (--email-allow, by default the domain of
// --smtp-from); nil, allowing any, when the node sends no email at all
// (neither is set), since sending then fails anyway.
func emailAllowed(smtp builtin.SMTPConfig) func(string) error {
	if smtp.From == "" && len(smtp.Allow) == 0 {
		return nil
	}
	return smtp.CheckRecipient
}

// UIURL is the web UI's address for a node whose API listens on addr: an
// unspecified host (0.0.0.0, ::) is shown as 127.0.0.1, which it serves too.
func UIURL(addr string, tls bool) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/"
}

// DataDirLock is the file in the data dir that a node on an embedded
// (SQLite) store holds an exclusive flock on while it runs.
const DataDirLock = "chime.lock"

// lockDataDir takes the data dir's lock when the store is SQLite: two
// processes in one data dir would share its node id and its database
// without knowing of each other. Processes meant to share one SQLite file
// (--file-locks) each have their own data dir. The returned func releases
// the lock; the kernel releases it when the process dies.
func lockDataDir(db, dataDir string) (func(), error) {
	if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(db)), "sqlite:") {
		return func() {}, nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dataDir, DataDirLock)
	fl := flock.New(path)
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("data dir lock %s: %w", path, err)
	}
	if !ok {
		holder := "another chime process"
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			holder += " (pid " + string(bytes.TrimSpace(b)) + ")"
		}
		return nil, fmt.Errorf("%w: the data dir %s is in use by %s, which holds %s: "+
			"stop that one, or give this one its own --data-dir", ErrConfig, dataDir, holder, path)
	}
	// The holder's pid, for the message above; the lock is what counts.
	if f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
		fmt.Fprintf(f, "%d\n", os.Getpid())
		f.Close()
	}
	return func() { _ = fl.Unlock() }, nil
}
