package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	chimelib "github.com/chimehq/chime" // "chime" is the tests' helper that runs the command line
	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/app/chaos"
	"github.com/chimehq/chime/internal/app/server"
	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/engine"
	"github.com/chimehq/chime/internal/engine/executor"
	"github.com/chimehq/chime/internal/engine/planner"
	"github.com/chimehq/chime/internal/engine/retention"
	"github.com/chimehq/chime/internal/engine/scheduler"
	"github.com/chimehq/chime/internal/store/sqlstore"
	"github.com/chimehq/chime/model"
)

func init() { addCommand(newServeCmd) }

// nodeOptions are the flags of a command that runs a node: `chime serve`
// and `chime cron start` share them.
type nodeOptions struct {
	cfg        server.Config
	configFile string
	logLevel   string
	logFormat  string
	secretKey  string // --secret-key as given; decoded into cfg.SecretKey
	lazy       removedLazyClaims
}

// config applies the environment and the config file to the flags that
// were not given, and returns the node's configuration.
func (o *nodeOptions) config(cmd *cobra.Command) (server.Config, error) {
	if err := applyConfig(cmd, o.configFile); err != nil {
		return server.Config{}, &ExitError{Code: 2, Err: err}
	}
	cfg := o.cfg
	if cfg.HistoryKeep < 0 || cfg.HistoryMaxAge < 0 {
		return server.Config{}, &ExitError{Code: 2, Err: errors.New("--history-keep and --history-max-age must not be negative (0: no limit)")}
	}
	// A 0 given for a history flag means no limit, which chime.HistoryConfig
	// spells negative (its zero is the default).
	if cfg.HistoryKeep == 0 {
		cfg.HistoryKeep = -1
	}
	if cfg.HistoryMaxAge == 0 {
		cfg.HistoryMaxAge = -1
	}
	if cfg.HTTPReadTimeout < 0 || cfg.HTTPWriteTimeout < 0 || cfg.HTTPIdleTimeout < 0 {
		return server.Config{}, &ExitError{Code: 2, Err: errors.New("--http-read-timeout, --http-write-timeout and --http-idle-timeout must not be negative (0: no limit)")}
	}
	if cfg.HTTPMaxHeaderBytes < 4096 {
		return server.Config{}, &ExitError{Code: 2, Err: fmt.Errorf("--http-max-header-bytes must be at least 4096, not %d", cfg.HTTPMaxHeaderBytes)}
	}
	// Likewise for the HTTP timeouts: 0 given is no limit.
	for _, d := range []*time.Duration{&cfg.HTTPReadTimeout, &cfg.HTTPWriteTimeout, &cfg.HTTPIdleTimeout} {
		if *d == 0 {
			*d = -1
		}
	}
	if err := o.secretsConfig(&cfg); err != nil {
		return server.Config{}, &ExitError{Code: 2, Err: err}
	}
	cfg.Logger = newLogger(cmd, o.logLevel, o.logFormat)
	cfg.Version = BuildVersion().Module
	clk, err := testClock(cfg.Logger)
	if err != nil {
		return server.Config{}, &ExitError{Code: 2, Err: err}
	}
	cfg.Clock = clk
	return cfg, nil
}

// EnvTestClockOffset names the test-only environment variable that shifts
// a node's clock by a Go duration ("5s", "-5s"), so that the e2e tests and
// the chaos tool can run a node whose clock is wrong. Never set it in
// production. The chaos tool sets it on the nodes it starts.
const EnvTestClockOffset = chaos.ClockOffsetEnv

// testClock returns this machine's clock shifted by EnvTestClockOffset, and
// logs a warning that it is; nil (the machine's clock) when the variable is
// unset or zero.
func testClock(log *slog.Logger) (clock.Clock, error) {
	v := os.Getenv(EnvTestClockOffset)
	if v == "" {
		return nil, nil
	}
	offset, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: want a Go duration such as 5s or -5s: %w", EnvTestClockOffset, v, err)
	}
	if offset == 0 {
		return nil, nil
	}
	log.Warn("test-only clock offset in effect: this node's clock is shifted", "env", EnvTestClockOffset, "offset", offset)
	return clock.System(offset), nil
}

// removedLazyClaims is --lazy-claims, kept only to refuse it: a node
// given it in any form (flag, CHIME_LAZY_CLAIMS, config key) exits 2.
type removedLazyClaims struct{}

// errLazyClaimsRemoved is what a node given --lazy-claims says.
var errLazyClaimsRemoved = errors.New("--lazy-claims was removed: every run is claimed with a conditional write before it starts; " +
	"drop the flag, CHIME_LAZY_CLAIMS or the config key lazy-claims (docs/guarantees.md)")

func (removedLazyClaims) String() string   { return "" }
func (removedLazyClaims) Set(string) error { return errLazyClaimsRemoved }
func (removedLazyClaims) Type() string     { return "removed" }

// domainRE is the form of a domain of --email-allow.
var domainRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+$`)

// envNameRE is the form of an environment variable name.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// secretsConfig checks the secrets' flags (docs/security.md) and decodes
// --secret-key.
func (o *nodeOptions) secretsConfig(cfg *server.Config) error {
	if o.secretKey != "" {
		key, err := sqlstore.ParseSecretKey(o.secretKey)
		if err != nil {
			return fmt.Errorf("--secret-key: %w", err)
		}
		cfg.SecretKey = key
	}
	if len(cfg.ShellAllow) > 0 && !cfg.AllowShell {
		return fmt.Errorf("--shell-allow lists the commands shell actions may run, but shell actions are off: add --allow-shell")
	}
	for _, a := range cfg.SMTP.Allow {
		if strings.Contains(a, "@") {
			if addr, err := mail.ParseAddress(a); err != nil || addr.Address != a {
				return fmt.Errorf("--email-allow: %q is not an email address (give bare addresses: ops@example.com)", a)
			}
		} else if !domainRE.MatchString(a) {
			return fmt.Errorf("--email-allow: %q is neither a domain nor an email address", a)
		}
	}
	if len(cfg.ShellEnvPass) > 0 && !cfg.AllowShell {
		return fmt.Errorf("--shell-env-pass names variables shell actions get, but shell actions are off: add --allow-shell")
	}
	for _, name := range cfg.ShellEnvPass {
		if !envNameRE.MatchString(name) {
			return fmt.Errorf("--shell-env-pass: %q is not an environment variable name (letters, digits and _, not starting with a digit)", name)
		}
		if slices.Contains(model.NodeSecretEnv, name) {
			return fmt.Errorf("--shell-env-pass: %s holds a secret of this node, which shell actions never get", name)
		}
	}
	return nil
}

func newServeCmd() *cobra.Command {
	var o nodeOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a chime node: engine, REST API, web UI and metrics",
		Long: `Run a chime node.

With no flags, chime keeps everything in one SQLite file under ./` + chimelib.DefaultDataDir + `
and listens on ` + server.DefaultListen + `. For a cluster, point every node at the same
database (--db mysql://… or postgres://…): the nodes coordinate through it,
or through Redis when given --redis redis://….

Every flag can also be set by an environment variable, CHIME_ and the flag
name in upper case (--node-id: CHIME_NODE_ID), or by a key of the same name
in the YAML file given by --config. Flags win over the environment, which
wins over the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx = stopWithGoRun(ctx, cfg.Logger)
			return serverError(server.Run(ctx, cfg))
		},
	}
	addNodeFlags(cmd, &o)
	return cmd
}

// stopWithGoRun returns a context that also ends when the go run that
// started this process exits. go run does not pass SIGTERM on to the
// program it runs (it dies of it, and ignores SIGINT, which a terminal
// sends the whole process group): without this, kill PID of a
// `go run ./cmd/chime serve &` job would leave the node running and
// holding its port. A binary run by go run lives in a build directory
// named exe; when go run is gone, the process has a new parent.
func stopWithGoRun(ctx context.Context, log *slog.Logger) context.Context {
	exe, err := os.Executable()
	if err != nil || filepath.Base(filepath.Dir(exe)) != "exe" {
		return ctx
	}
	parent := os.Getppid()
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != parent {
					log.Info("go run exited: stopping")
					cancel()
					return
				}
			}
		}
	}()
	return ctx
}

// serverError makes a configuration the server refused a usage error
// (exit 2).
func serverError(err error) error {
	if errors.Is(err, server.ErrConfig) {
		return &ExitError{Code: 2, Err: err}
	}
	return err
}

// addNodeFlags adds the flags of serve to cmd.
func addNodeFlags(cmd *cobra.Command, o *nodeOptions) {
	cfg := &o.cfg
	f := cmd.Flags()
	f.StringVar(&o.configFile, "config", "", "YAML configuration file (keys are the flag names)")
	f.StringVar(&cfg.Listen, "listen", server.DefaultListen, "address of the REST API, web UI and metrics")
	f.StringVar(&cfg.DB, "db", "", fmt.Sprintf("store: sqlite:///path/file.db (default %s), mysql://user:pass@host:port/db, postgres://user:pass@host:port/db",
		chimelib.DefaultDB(chimelib.DefaultDataDir)))
	f.StringVar(&cfg.Redis, "redis", "", "Redis for the cluster's slice index and locks: redis://host:port/0 (rediss:// with TLS), redis-sentinel://host:port,host:port/MASTER[?db=N] (Sentinel) or redis-cluster://host:port,host:port (Redis Cluster)")
	cfg.Coordination = "auto"
	f.Var(newChoice(&cfg.Coordination, "auto", "db", "redis"), "coordination",
		"where the cluster's slice locks, leader elections and slice index live: redis (needs --redis), db (the database of --db), or auto: redis with --redis, db on MySQL/MariaDB and PostgreSQL, in process on SQLite. Every node of a cluster must run the same")
	f.StringVar(&cfg.DataDir, "data-dir", chimelib.DefaultDataDir, "directory for the node id and daemon files")
	f.StringVar(&cfg.NodeID, "node-id", "", "node id (default: generated once and kept in the data dir)")
	// The node's knobs default to zero, which chime.New reads as its
	// default: the help prints chime's constants.
	f.IntVar(&cfg.Buckets, "buckets", 0, fmt.Sprintf("buckets per minute slice (all nodes must agree; default %d embedded, %d with --coordination db, %d with Redis)",
		chimelib.DefaultBuckets, chimelib.DefaultDBBuckets, chimelib.DefaultRedisBuckets))
	f.DurationVar(&cfg.Lookahead, "lookahead", 0, fmt.Sprintf("how far ahead runs are planned (default %v)", planner.DefaultLookahead))
	f.IntVar(&cfg.PlanFires, "plan-fires", 0, fmt.Sprintf("plan each timer's next fires, at least this many, within the look-ahead (default %d)", planner.DefaultFiresAhead))
	f.DurationVar(&cfg.PlanAhead, "plan-ahead", 0, fmt.Sprintf("plan each timer at least this far ahead, within the look-ahead (default %v)", engine.DefaultPlanAhead))
	f.IntVar(&cfg.PoolSize, "pool-size", 0, fmt.Sprintf("actions running at once (default %d)", executor.DefaultPoolSize))
	f.DurationVar(&cfg.LockTTL, "lock-ttl", 0, fmt.Sprintf("slice lock lease; bounds failover after a crash (default %v)", scheduler.DefaultLockTTL))
	f.DurationVar(&cfg.Lease, "lease", 0, fmt.Sprintf("lease of a running attempt, extended while it runs; a store outage longer than this stops running actions (default %v)",
		executor.DefaultLease))
	f.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 0, fmt.Sprintf("how long in-flight actions may finish on SIGTERM before they are cancelled and their runs given back (default %v)",
		server.DefaultShutdownTimeout))
	f.DurationVar(&cfg.MaxClockSkew, "max-clock-skew", 0, fmt.Sprintf("how far this node's clock may be off the store's before it stops claiming and /readyz answers 503 (default %v)",
		engine.DefaultMaxClockSkew))
	f.IntVar(&cfg.HistoryKeep, "history-keep", retention.DefaultKeep, "finished runs kept per timer whose history.keep is not set; 0: no count limit")
	f.DurationVar(&cfg.HistoryMaxAge, "history-max-age", retention.DefaultMaxAge, "how long finished runs of timers whose history.max_age is not set, and audit entries, are kept; 0: no age limit")
	f.Var(&o.lazy, "lazy-claims", "removed: every run is claimed with a write; a node given it exits 2")
	f.Lookup("lazy-claims").NoOptDefVal = "true"
	_ = f.MarkHidden("lazy-claims")
	f.BoolVar(&cfg.FileLocks, "file-locks", false, "several chime processes share one SQLite file on this host: split the slices with file locks beside the file (give each process its own --data-dir or --node-id)")
	f.BoolVar(&cfg.AllowShell, "allow-shell", false, "allow shell actions (remote code execution for anyone who can call the API)")
	f.IntVar(&cfg.DBMaxOpenConns, "db-max-open-conns", 0, "maximum open database connections")
	f.IntVar(&cfg.DBMaxIdleConns, "db-max-idle-conns", 0, "maximum idle database connections")
	cfg.SQLiteSynchronous = sqlstore.SynchronousFull
	f.Var(newChoice(&cfg.SQLiteSynchronous, sqlstore.SynchronousFull, sqlstore.SynchronousNormal), "sqlite-synchronous",
		"SQLite commit durability: full (each claim and result synced to disk) or normal (synced at checkpoints: faster, but a power loss or OS crash may undo the last commits and re-run fires that succeeded); a _pragma=synchronous(…) in --db wins")
	cfg.Auth = "auto"
	f.Var(newChoice(&cfg.Auth, "auto", "on", "off"), "auth", "require API tokens: on, off, or auto (on when --admin-token is set, a token exists or --listen is not loopback)")
	f.StringVar(&cfg.AdminToken, "admin-token", "", "bootstrap admin token, at least 16 characters (prefer CHIME_ADMIN_TOKEN)")
	f.BoolVar(&cfg.InsecureNoAuth, "insecure-no-auth", false, "allow serving a non-loopback address without authentication (only behind something that authenticates)")
	f.BoolVar(&cfg.MetricsPublic, "metrics-public", false, "serve /metrics without a token")
	f.StringSliceVar(&cfg.AllowedHosts, "allowed-hosts", nil, "Host header values served, host:port (default on loopback: the listen host, localhost, 127.0.0.1 and [::1] with the port; otherwise any)")
	f.StringSliceVar(&cfg.AllowedOrigins, "allowed-origins", nil, "browser origins (scheme://host:port) allowed besides the server's own")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "serve HTTPS (and HTTP/2) with this PEM certificate chain")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key of --tls-cert")
	// Callback egress policy and signing (package egress, docs/callbacks.md).
	f.Var(newCIDRList(&cfg.CallbackDeny), "callback-deny", "CIDRs that HTTP callbacks may not connect to, repeatable or comma-separated, denied besides the built-in list ("+
		strings.Join(egress.DefaultDeny, ", ")+"); e.g. 127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7 denies loopback and private ranges too")
	f.Var(newCIDRList(&cfg.CallbackAllow), "callback-allow", "CIDRs that HTTP callbacks may connect to even when denied (by --callback-deny or the built-in list), repeatable or comma-separated")
	f.DurationVar(&cfg.HTTPReadTimeout, "http-read-timeout", server.DefaultHTTPReadTimeout, "how long a client may take to send a request, headers and body; 0: no limit")
	f.DurationVar(&cfg.HTTPWriteTimeout, "http-write-timeout", server.DefaultHTTPWriteTimeout, "how long the API may take to answer a request, from the end of its headers; 0: no limit")
	f.DurationVar(&cfg.HTTPIdleTimeout, "http-idle-timeout", server.DefaultHTTPIdleTimeout, "how long a kept-alive connection may wait for its next request; 0: no limit")
	f.IntVar(&cfg.HTTPMaxHeaderBytes, "http-max-header-bytes", server.DefaultHTTPMaxHeaderBytes, "largest request header accepted, in bytes (431 beyond)")
	f.DurationVar(&cfg.SigningOverlap, "signing-overlap", api.DefaultSigningOverlap, "how long a rotated callback signing secret keeps signing beside the new one")
	f.StringVar(&cfg.SMTP.Host, "smtp-host", "", "SMTP server of the send_email handler")
	f.IntVar(&cfg.SMTP.Port, "smtp-port", 0, "SMTP port (default 587 with --smtp-starttls, else 25)")
	f.StringVar(&cfg.SMTP.From, "smtp-from", "", "sender address of send_email")
	f.StringVar(&cfg.SMTP.Username, "smtp-username", "", "SMTP user name (AUTH PLAIN)")
	f.StringVar(&cfg.SMTP.Password, "smtp-password", "", "SMTP password (prefer CHIME_SMTP_PASSWORD)")
	f.BoolVar(&cfg.SMTP.StartTLS, "smtp-starttls", false, "upgrade the SMTP connection with STARTTLS")
	f.StringSliceVar(&cfg.SMTP.Allow, "email-allow", nil, "domains (example.com) and addresses (ops@example.org) that send_email, generate_report and email notifications may send to, repeatable or comma-separated (default: the domain of --smtp-from)")
	// Secrets (docs/security.md).
	f.StringVar(&o.secretKey, "secret-key", "", "encrypt the secrets of actions at rest with this AES-256 key: the base64 of 32 random bytes, or @FILE holding it (prefer @FILE or CHIME_SECRET_KEY; losing the key loses the secrets)")
	f.StringSliceVar(&cfg.CleanupRoots, "cleanup-root", nil, "directory the cleanup_files handler may work in, repeatable; without it cleanup_files is not available")
	f.StringSliceVar(&cfg.OutputRoots, "output-root", nil, "directory the backup_database and generate_report handlers may write files in, repeatable; without it they write no files")
	f.StringSliceVar(&cfg.BuiltinsApps, "builtins-apps", nil, "apps whose write tokens may save timers running backup_database or cleanup_files (which act on the node); otherwise only an admin token may")
	f.StringSliceVar(&cfg.ShellAllow, "shell-allow", nil, "with --allow-shell, the only commands shell actions may run (exact match of action.shell.command), repeatable; allowing a shell such as sh allows everything")
	f.StringSliceVar(&cfg.ShellEnvPass, "shell-env-pass", nil, "with --allow-shell, names of this node's environment variables shell actions get besides PATH, HOME, LANG and TZ, repeatable or comma-separated (the node's secrets, such as CHIME_ADMIN_TOKEN, never)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
}

func newLogger(cmd *cobra.Command, level, format string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler = slog.NewTextHandler(cmd.ErrOrStderr(), opts)
	if strings.EqualFold(format, "json") {
		h = slog.NewJSONHandler(cmd.ErrOrStderr(), opts)
	}
	l := slog.New(h)
	slog.SetDefault(l)
	return l
}

// choice is a string flag that takes one of a fixed set of values (case
// insensitive): anything else is an error, which cobra, the environment and
// the config file report with the flag's name.
type choice struct {
	p       *string
	choices []string
}

func newChoice(p *string, choices ...string) *choice { return &choice{p: p, choices: choices} }

func (c *choice) String() string {
	if c.p == nil {
		return ""
	}
	return *c.p
}

func (c *choice) Set(v string) error {
	v = strings.ToLower(strings.TrimSpace(v))
	if !slices.Contains(c.choices, v) {
		return fmt.Errorf("must be %s", strings.Join(c.choices, " or "))
	}
	*c.p = v
	return nil
}

func (c *choice) Type() string { return strings.Join(c.choices, "|") }
