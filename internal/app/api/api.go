// Package api serves chime's REST API (/api/v1), its web UI, /metrics,
// /healthz and /readyz.
//
// The JSON types of the API (Timer, Run, ...) are distinct from the model
// types: they carry durations as Go duration strings ("30s") and leave out
// internal bookkeeping. Command line and Go clients decode into them.
//
// Every error answer has one shape:
//
//	{"error": {"field": "schedule", "message": "hour: 24 is out of range 0-23"}}
//
// with 400 for bad input, 401 for a missing or invalid token, 403 for a
// token that may not do this (or a browser request from another origin),
// 404 for unknown ids and routes (and for timers and runs of apps the token
// may not see), 405 for a wrong method, 409 for a duplicate (app, name), 413
// for an oversized body, 415 for a body that is not JSON, 421 for a Host
// that is not served, and 500 only for server faults, which are logged.
//
// Who may call what is in docs/security.md: every route is registered with
// its access level, and the handlers of timers and runs check the token's
// apps.
//
// The routes, their parameters, bodies and errors are described by the
// OpenAPI 3.1 document openapi.json, served at GET /api/v1/openapi.json.
// It is written by hand; TestOpenAPI sends requests to every route and
// validates each request and answer against it, and fails for a route the
// document leaves out.
//
// Start reading at New (api.go): its route table names, for each route,
// its access level and its handler. Server keeps the table, the
// middleware (auth.go: authentication, access levels, browser checks;
// api.go: panics and JSON errors for unknown routes), the probes, the
// OpenAPI document (openapi.go) and the UI (ui.go). The handlers are
// grouped by resource, each group a type holding only what it uses and
// sharing env (env.go: clock, logger, body limit, audit log, and the
// helpers that decode bodies, answer errors and record audit entries):
//
//   - timersAPI: the timers, their lists and counts, their next fires and
//     the graph of the timers that run after them, with the checks of a
//     save (timers.go, timerstates.go, next.go, graph.go, fleet.go).
//   - actionsAPI: what a request makes a timer do: enable, disable,
//     trigger, backfill, rerun a run (actions.go), pause and resume one
//     timer, a batch or an app's timers (batch.go).
//   - runsAPI: the runs of a timer and of every timer (runs.go).
//   - appsAPI: an app's signing secret, notify rules (apps.go) and
//     secrets (appsecrets.go).
//   - securityAPI: tokens and the audit log (tokens.go).
//   - clusterAPI: nodes, stats and their series, the schedule preview and
//     the action types (misc.go, series.go, statscache.go).
//
// The JSON types are in dto.go and beside their routes; what the API
// needs of the store and the engine are stores.go and Engine.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
)

// Engine is what the API needs of the running engine.
type Engine interface {
	// The save path's planning (timers.Engine): the engine plans,
	// replans or cancels the runs of a timer created, updated, enabled or
	// disabled, in the save's own transaction.
	timers.Engine
	// TimerDeleted is called after a timer was deleted.
	TimerDeleted(ctx context.Context, id string) error
	// Trigger fires t now, outside its schedule, and returns the new run.
	Trigger(ctx context.Context, t *model.Timer) (*model.Run, error)
	// Rerun makes a new manual run of t that runs orig, a run of t,
	// again (see model.Run.RerunOf), and returns it.
	Rerun(ctx context.Context, t *model.Timer, orig *model.Run) (*model.Run, error)
	// Backfill runs now, once each, t's fires in [from, to] (at most max;
	// more gives ErrTooManyFires), and returns the runs.
	Backfill(ctx context.Context, t *model.Timer, from, to time.Time, max int) ([]*model.Run, error)
	// PoolStats reports the executor pool: actions running and capacity.
	PoolStats() (running, capacity int)
	// Nodes lists the live nodes and the slices each holds.
	Nodes(ctx context.Context) ([]model.Node, error)
	// Ready reports whether the node can serve (store reachable, engine started).
	Ready(ctx context.Context) error
}

// ErrTooManyFires is returned by Engine.Backfill for a range with more
// fires than allowed.
var ErrTooManyFires = model.ErrTooManyFires

// DefaultMaxBodyBytes is the largest request body accepted when
// Config.MaxBodyBytes is zero.
const DefaultMaxBodyBytes = 1 << 20

// Config configures a Server. Store and Engine are required.
type Config struct {
	Store  Store
	Engine Engine
	// Gatherer is served on /metrics; nil means prometheus.DefaultGatherer.
	Gatherer prometheus.Gatherer
	// Logger logs server faults; nil means slog.Default().
	Logger *slog.Logger
	// AllowShell permits timers with shell actions.
	AllowShell bool
	// ShellAllow, when not empty, lists the only commands shell actions
	// may run (see timers.ValidateOptions.ShellAllow).
	ShellAllow []string
	// EmailAllowed, when set, refuses the email addresses of notify rules
	// the node may not send to (--email-allow); nil allows any.
	EmailAllowed func(address string) error
	// HandlerExists reports whether a Go handler is registered under name
	// on this node (or known to it otherwise). A handler timer is created
	// when it does or when a live node advertises the handler
	// (Engine.Nodes); else it is refused unless the request says
	// ?allow_unknown_handler=true. Nil: only the live nodes count.
	HandlerExists func(name string) bool
	// ValidateArgs checks handler args at creation (see
	// timers.ValidateOptions).
	ValidateArgs func(name string, args []byte) error
	// Clock is the API's time (created_at, next fires, audit entries);
	// nil means the system clock. A node passes its engine's clock.
	Clock clock.Clock
	// MaxBodyBytes limits request bodies; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64

	// Auth is AuthOn, AuthOff or AuthAuto (the default, "").
	Auth string
	// AdminToken is the bootstrap admin token; empty: none.
	AdminToken string
	// MetricsPublic serves /metrics without a token.
	MetricsPublic bool
	// AllowedHosts are the Host header values served; empty accepts any
	// (see DefaultAllowedHosts).
	AllowedHosts []string
	// AllowedOrigins are origins (scheme://host[:port]) besides the
	// server's own whose browser requests are served.
	AllowedOrigins []string

	// Egress refuses timers whose callback URL is a literal address it
	// denies (400 on action.http.url); nil means egress.Default().
	Egress *egress.Policy
	// Series is the answering node's last hour of fires and fire delays,
	// served by GET /api/v1/stats/series (a node's Node.Series) merged
	// with the other nodes' minutes from the store (store.Dashboard); nil
	// serves the store's only.
	Series *metrics.Series
	// NodeID is the answering node's id: its minutes in the store are
	// left out of GET /api/v1/stats/series, which has them fresher from
	// Series. Empty: every stored minute is added to Series'.
	NodeID string
	// SigningOverlap is how long a rotated signing secret keeps signing
	// beside the new one; zero means DefaultSigningOverlap.
	SigningOverlap time.Duration
	// StatsMaxAge is how old the counts of GET /api/v1/stats may be: they
	// are counted again, in the background, at most this often, or ten
	// times as long as a count takes if longer (see statsCache); zero
	// means DefaultStatsMaxAge, negative counts at every call.
	StatsMaxAge time.Duration
	// NodeHandlers are the handlers that act on the node itself (its
	// database, its files): only an admin token not scoped to apps may
	// save, trigger or backfill a timer that runs one, unless the timer's
	// app is in BuiltinsApps (403 otherwise).
	NodeHandlers []string
	// BuiltinsApps are the apps whose timers may run NodeHandlers when
	// saved by any write token of the app (--builtins-apps).
	BuiltinsApps []string
	// RotatingSecrets, when set, is told of a rotation of app's signing
	// secret before it is made, and done once it committed: the node's
	// callbacks sign with the new secret from then on (see
	// action.SecretCache.Rotating).
	RotatingSecrets func(app string) (done func())
	// AuthFailBurst is how many failed authentications a client address
	// may make at once (refilled at AuthFailRate a second); zero means
	// AuthFailBurst.
	AuthFailBurst int
	// WriteTimeout is the HTTP server's write timeout (zero: none): an
	// app's pause and resume, which act on every timer of the app, extend
	// it by this much for each page of timers they act on.
	WriteTimeout time.Duration
	// Version is the server's build version (chime version), given as
	// info.version of GET /api/v1/openapi.json; empty keeps the
	// document's own.
	Version string
}

// Server serves the API. Create it with New. It holds the route table
// (New), the middleware every request passes (recoverer, browserGuard,
// guard in auth.go, jsonErrors), the probes, the OpenAPI document and the
// UI; the handlers of each resource are a type of their own, which New
// wires with what it needs.
type Server struct {
	*env
	store   SecurityStore // of the authenticator
	engine  Engine        // of /readyz
	handler http.Handler
	openapi []byte // GET /api/v1/openapi.json, info.version set

	auth           *authenticator
	allowedHosts   []string
	allowedOrigins []string

	// patterns are the ServeMux patterns of every route, in the order
	// registered: the OpenAPI test checks each has a documented operation.
	patterns []string

	timersAPI   *timersAPI
	actionsAPI  *actionsAPI
	runsAPI     *runsAPI
	appsAPI     *appsAPI
	securityAPI *securityAPI
	clusterAPI  *clusterAPI
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	s := &Server{
		env: &env{log: cfg.Logger, now: clock.Default(cfg.Clock).Now, maxBody: cfg.MaxBodyBytes,
			audits: cfg.Store},
		store:          cfg.Store,
		engine:         cfg.Engine,
		allowedHosts:   cfg.AllowedHosts,
		allowedOrigins: cfg.AllowedOrigins,
	}
	s.auth = newAuthenticator(s, cfg.Auth, cfg.AdminToken)
	s.openapi = openAPIWithVersion(cfg.Version)
	if cfg.AuthFailBurst > 0 {
		s.auth.fails.burst = cfg.AuthFailBurst
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	overlap := cfg.SigningOverlap
	if overlap <= 0 {
		overlap = DefaultSigningOverlap
	}
	minutes := &minutesCache{node: cfg.NodeID, now: s.now,
		load: func(ctx context.Context, since time.Time) ([]store.StatsMinute, error) {
			return cfg.Store.StatsMinutes(ctx, since)
		}}
	counts := &statsCache{maxAge: cfg.StatsMaxAge, now: s.now, log: s.log,
		load: func(ctx context.Context) (store.Stats, error) { return cfg.Store.Stats(ctx) }}
	if counts.maxAge == 0 {
		counts.maxAge = DefaultStatsMaxAge
	}
	callbacks := cfg.Egress
	if callbacks == nil {
		callbacks = egress.Default()
	}
	save := timers.NewService(timers.Config{
		Store: cfg.Store, Engine: cfg.Engine, Clock: clock.Default(cfg.Clock), Logger: s.log,
		Validate: timers.ValidateOptions{AllowShell: cfg.AllowShell, ShellAllow: cfg.ShellAllow,
			// Any handler name validates here: the API checks it against
			// the handlers the live nodes advertise (handlerCheck).
			HandlerExists: func(string) bool { return true }, ValidateArgs: cfg.ValidateArgs, Egress: callbacks,
			EmailAllowed: cfg.EmailAllowed},
	})
	s.appsAPI = &appsAPI{env: s.env, store: cfg.Store, overlap: overlap, rotating: cfg.RotatingSecrets,
		emailAllowed: cfg.EmailAllowed}
	s.timersAPI = &timersAPI{env: s.env, store: cfg.Store, engine: cfg.Engine, timers: save, apps: s.appsAPI,
		handlerExists: cfg.HandlerExists, nodeHandlers: cfg.NodeHandlers, builtinsApps: cfg.BuiltinsApps,
		minutes: minutes, series: cfg.Series}
	s.runsAPI = &runsAPI{env: s.env, store: cfg.Store, timersAPI: s.timersAPI}
	s.actionsAPI = &actionsAPI{env: s.env, store: cfg.Store, engine: cfg.Engine, timers: save,
		timersAPI: s.timersAPI, runsAPI: s.runsAPI, writeTimeout: cfg.WriteTimeout}
	s.securityAPI = &securityAPI{env: s.env, store: cfg.Store, auth: s.auth}
	s.clusterAPI = &clusterAPI{env: s.env, engine: cfg.Engine, counts: counts, minutes: minutes,
		series: cfg.Series, shell: cfg.AllowShell}
	g := cfg.Gatherer
	if g == nil {
		g = prometheus.DefaultGatherer
	}

	metricsAccess := accessCluster
	if cfg.MetricsPublic {
		metricsAccess = accessOpen
	}
	mux := http.NewServeMux()
	for _, rt := range []struct {
		pattern string
		access  access
		h       http.HandlerFunc
	}{
		{"POST /api/v1/timers", accessWrite, s.timersAPI.createTimer},
		{"POST /api/v1/timers:batch", accessWrite, s.actionsAPI.batchTimers},
		{"GET /api/v1/timers", accessRead, s.timersAPI.listTimers},
		{"GET /api/v1/timers:counts", accessRead, s.timersAPI.timerCounts},
		{"GET /api/v1/timers/{id}", accessRead, s.timersAPI.getTimer},
		{"PUT /api/v1/timers/{id}", accessWrite, s.timersAPI.putTimer},
		{"DELETE /api/v1/timers/{id}", accessWrite, s.timersAPI.deleteTimer},
		{"POST /api/v1/timers/{id}/enable", accessWrite, s.actionsAPI.enableTimer},
		{"POST /api/v1/timers/{id}/disable", accessWrite, s.actionsAPI.disableTimer},
		{"POST /api/v1/timers/{id}/trigger", accessWrite, s.actionsAPI.triggerTimer},
		{"POST /api/v1/timers/{id}/pause", accessWrite, s.actionsAPI.pauseTimer},
		{"POST /api/v1/timers/{id}/resume", accessWrite, s.actionsAPI.resumeTimer},
		{"POST /api/v1/timers/{id}/backfill", accessWrite, s.actionsAPI.backfillTimer},
		{"GET /api/v1/timers/{id}/runs", accessRead, s.runsAPI.listRuns},
		{"GET /api/v1/timers/{id}/graph", accessRead, s.timersAPI.timerGraph},
		{"GET /api/v1/timers/{id}/next", accessRead, s.timersAPI.timerNext},
		{"GET /api/v1/runs", accessRead, s.runsAPI.listAllRuns},
		{"GET /api/v1/runs/counts", accessRead, s.runsAPI.runCounts},
		{"GET /api/v1/runs/{id}", accessRead, s.runsAPI.getRun},
		{"POST /api/v1/runs/{id}/rerun", accessWrite, s.actionsAPI.rerunRun},
		{"GET /api/v1/schedule/next", accessRead, s.clusterAPI.scheduleNext},
		{"GET /api/v1/action-types", accessRead, s.clusterAPI.actionTypes},
		{"GET /api/v1/stats", accessCluster, s.clusterAPI.stats},
		{"GET /api/v1/stats/series", accessCluster, s.clusterAPI.statsSeries},
		{"GET /api/v1/nodes", accessCluster, s.clusterAPI.nodes},
		{"POST /api/v1/tokens", accessAdmin, s.securityAPI.createToken},
		{"GET /api/v1/tokens", accessAdmin, s.securityAPI.listTokens},
		{"DELETE /api/v1/tokens/{id}", accessAdmin, s.securityAPI.deleteToken},
		{"GET /api/v1/audit", accessAudit, s.securityAPI.listAudit},
		{"GET /api/v1/apps/{app}/signing-secret", accessAppWrite, s.appsAPI.getSigningSecret},
		{"POST /api/v1/apps/{app}/signing-secret/rotate", accessAppWrite, s.appsAPI.rotateSigningSecret},
		{"POST /api/v1/apps/{app}/pause", accessAppWrite, s.actionsAPI.pauseApp},
		{"POST /api/v1/apps/{app}/resume", accessAppWrite, s.actionsAPI.resumeApp},
		{"GET /api/v1/apps/{app}/notify", accessAppWrite, s.appsAPI.getAppNotify},
		{"PUT /api/v1/apps/{app}/notify", accessAppWrite, s.appsAPI.putAppNotify},
		{"GET /api/v1/apps/{app}/secrets", accessAppWrite, s.appsAPI.listAppSecrets},
		{"PUT /api/v1/apps/{app}/secrets/{name}", accessAppWrite, s.appsAPI.putAppSecret},
		{"DELETE /api/v1/apps/{app}/secrets/{name}", accessAppWrite, s.appsAPI.deleteAppSecret},
		{"GET /api/v1/openapi.json", accessOpen, s.openAPI},
		{"GET /healthz", accessOpen, s.healthz},
		{"GET /readyz", accessOpen, s.readyz},
		// The UI's pages: the same shell at each path (see UIPaths).
		{"GET /{$}", accessOpen, s.ui},
		{"GET /timers", accessOpen, s.ui},
		{"GET /timers/new", accessOpen, s.ui},
		{"GET /timers/{id}", accessOpen, s.ui},
		{"GET /timers/{id}/edit", accessOpen, s.ui},
		{"GET /runs", accessOpen, s.ui},
		{"GET /runs/{id}", accessOpen, s.ui},
		{"GET /nodes", accessOpen, s.ui},
	} {
		s.handle(mux, rt.pattern, rt.access, rt.h)
	}
	s.handle(mux, "GET /metrics", metricsAccess, promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorLog: slogPromLogger{s.log}}))
	s.handle(mux, "GET /ui/", accessOpen, uiFiles())
	s.handler = s.recoverer(s.browserGuard(jsonErrors(mux)))
	return s
}

// Handler returns the HTTP handler of every route.
func (s *Server) Handler() http.Handler { return s.handler }

// jsonErrors answers requests that match no route (404) or no method of a
// route (405) with the JSON error shape instead of ServeMux's plain text.
func jsonErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		// ServeMux's own not-found or method-not-allowed handler: learn
		// its status and Allow header, answer in JSON.
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusMethodNotAllowed:
			if allow := rec.header.Get("Allow"); allow != "" {
				w.Header().Set("Allow", allow)
			}
			writeError(w, http.StatusMethodNotAllowed, "", "method "+r.Method+" is not allowed on "+r.URL.Path)
		case http.StatusNotFound, 0:
			if wantsPage(r) {
				uiNotFound(w, r) // the UI says so, with its links
				return
			}
			writeError(w, http.StatusNotFound, "", "no route for "+r.Method+" "+r.URL.Path)
		default:
			// Redirects (path cleaning) and anything else: serve as is.
			mux.ServeHTTP(w, r)
		}
	})
}

// statusRecorder captures the status and headers a handler writes.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

// recoverer turns a panic in a handler into a logged 500.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("api: panic", "method", r.Method, "path", r.URL.Path, "panic", v)
				writeError(w, http.StatusInternalServerError, "", "internal server error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// serverError logs err and answers 500 without details.
func (s *env) serverError(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("api: server error", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusInternalServerError, "", "internal server error")
}

// storeError answers err from the store: 404 for model.ErrNotFound, 409
// for model.ErrConflict, 500 otherwise.
func (s *env) storeError(w http.ResponseWriter, r *http.Request, err error, what string) {
	switch {
	case errors.Is(err, model.ErrNotFound):
		writeError(w, http.StatusNotFound, "", what+" not found")
	case errors.Is(err, model.ErrConflict):
		writeError(w, http.StatusConflict, "name", "a timer with this app and name already exists")
	default:
		s.serverError(w, r, err)
	}
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Reason codes of a 503 of /readyz (ErrorDetail.Reason).
const (
	ReadyNotStarted       = "not_started"
	ReadyClockSkew        = "clock_skew"
	ReadyStoreUnreachable = "store_unreachable"
)

// readyz answers whether the node can serve. Not ready, it answers 503
// with a reason code and its fixed message to everyone; the error itself
// (a store's error may name hosts, users, paths) only to a token that may
// manage the cluster (accessAdmin), which /readyz, open to probes, reads
// when one is sent.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	err := s.engine.Ready(r.Context())
	if err == nil {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return
	}
	s.log.Warn("api: not ready", "err", err)
	reason, msg := ReadyStoreUnreachable, "store unreachable"
	switch {
	case errors.Is(err, model.ErrNotStarted):
		reason, msg = ReadyNotStarted, "engine not started"
	case errors.Is(err, model.ErrClockSkew):
		reason, msg = ReadyClockSkew, "clock skew"
	}
	msg = "not ready: " + msg
	if p, aerr := s.auth.authenticate(r); aerr == nil && p.may(accessAdmin, r) {
		msg += ": " + err.Error()
	}
	writeJSON(w, http.StatusServiceUnavailable, ErrorBody{Error: ErrorDetail{Message: msg, Reason: reason}})
}

// slogPromLogger adapts slog to promhttp's error logger.
type slogPromLogger struct{ log *slog.Logger }

func (l slogPromLogger) Println(v ...any) { l.log.Error("metrics: gather", "err", v) }
