package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"golang.org/x/time/rate"

	"github.com/chimehq/chime/model"
)

// Authentication modes (Config.Auth).
const (
	// AuthOn requires a token on every route but /healthz, /readyz,
	// /api/v1/openapi.json and the UI's page and static files.
	AuthOn = "on"
	// AuthOff lets every request in as an administrator.
	AuthOff = "off"
	// AuthAuto is on when an admin token is configured or any token
	// exists in the store, and off otherwise. The server turns it on for a
	// listen address that is not loopback before it gets here.
	AuthAuto = "auto"
)

// TokenPrefix starts every API token chime makes.
const TokenPrefix = "chm_"

// AdminTokenName is the audit name of the bootstrap admin token.
const AdminTokenName = "admin"

// tokenCacheTTL is how long a node trusts a token it looked up (and the
// answer to "does any token exist"): a revoked token stops working on
// every node within it, well inside the 5 s the contract allows.
const tokenCacheTTL = 2 * time.Second

// access says who may call a route.
type access int

const (
	// accessOpen: anyone, without a token.
	accessOpen access = iota
	// accessRead: any valid token.
	accessRead
	// accessWrite: a write or admin token.
	accessWrite
	// accessCluster: any token not scoped to apps (cluster-wide data).
	accessCluster
	// accessAdmin: an admin token not scoped to apps.
	accessAdmin
	// accessAppWrite: a write or admin token allowed the {app} path value.
	accessAppWrite
	// accessAudit: an admin token, or a token scoped to apps (which then
	// sees their entries only).
	accessAudit
)

// principal is who makes a request.
type principal struct {
	id, name, role string
	apps           []string
	// open is true when authentication is off: the caller is anonymous
	// and may do everything.
	open bool
}

func (p *principal) scoped() bool { return len(p.apps) > 0 }

func (p *principal) allowsApp(app string) bool { return !p.scoped() || slices.Contains(p.apps, app) }

func (p *principal) atLeast(role string) bool { return model.RoleRank(p.role) >= model.RoleRank(role) }

// may reports whether p may call a route of access a, for the request r.
func (p *principal) may(a access, r *http.Request) bool {
	switch a {
	case accessOpen, accessRead:
		return true
	case accessWrite:
		return p.atLeast(model.RoleWrite)
	case accessCluster:
		return !p.scoped()
	case accessAdmin:
		return p.atLeast(model.RoleAdmin) && !p.scoped()
	case accessAppWrite:
		return p.atLeast(model.RoleWrite) && p.allowsApp(r.PathValue("app"))
	case accessAudit:
		return p.atLeast(model.RoleAdmin) || p.scoped()
	}
	return false
}

type principalKey struct{}

// principalOf returns the request's principal; a request that came through
// no authentication (tests calling handlers directly) is open.
func principalOf(ctx context.Context) *principal {
	if p, ok := ctx.Value(principalKey{}).(*principal); ok {
		return p
	}
	return openPrincipal
}

var openPrincipal = &principal{open: true, name: "anonymous", role: model.RoleAdmin}

// HashToken returns the stored form of a token: the hex SHA-256. Tokens
// are 32 random bytes, so a fast hash is as safe as a slow one here.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewToken returns a new random token: TokenPrefix and 32 random bytes in
// unpadded URL-safe base64.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// authenticator checks bearer tokens, caching store lookups for
// tokenCacheTTL, and the hashes of unknown tokens for unknownTokenTTL.
type authenticator struct {
	mode      string
	adminHash [sha256.Size]byte
	hasAdmin  bool
	s         *Server

	mu      sync.Mutex
	cache   map[string]cachedToken // by hash
	unknown map[string]time.Time   // hashes found in no token, until when
	touched map[string]time.Time   // token id → last use recorded by this node
	anyTok  cachedBool
	fails   *failLimiter
}

// unknownTokenTTL is how long a node answers a token found in no token
// without asking the store again; creating a token on the node forgets
// them all. Tokens are random: a token that did not exist a moment ago is
// not presented before its creation answers it.
const unknownTokenTTL = 10 * time.Second

// TokenUseResolution is how often a token's last use (LastUsedAt) is
// written: at most once per this interval per token and node, to the
// start of the interval.
const TokenUseResolution = time.Minute

// Failed authentications are limited per client address: AuthFailRate a
// second, bursts of AuthFailBurst; beyond, every request from the address
// is answered 429 with Retry-After until the bucket refills.
const (
	AuthFailRate  = 10
	AuthFailBurst = 20
)

// maxAuthLimiters bounds the addresses whose failures are counted: beyond
// it the addresses whose buckets are full again are dropped, and if none
// is, all of them.
const maxAuthLimiters = 10000

// failLimiter counts failed authentications per client address.
type failLimiter struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	now   func() time.Time
	burst int
}

// blocked reports whether addr has used its failures up, and when it may
// try again.
func (f *failLimiter) blocked(addr string) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.m[addr]
	if l == nil {
		return 0, false
	}
	tokens := l.TokensAt(f.now())
	if tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - tokens) / AuthFailRate * float64(time.Second)), true
}

// failed counts a failed authentication of addr.
func (f *failLimiter) failed(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	l := f.m[addr]
	if l == nil {
		if len(f.m) >= maxAuthLimiters {
			for a, l := range f.m {
				if l.TokensAt(now) >= float64(f.burst) {
					delete(f.m, a)
				}
			}
			if len(f.m) >= maxAuthLimiters {
				clear(f.m)
			}
		}
		l = rate.NewLimiter(AuthFailRate, f.burst)
		f.m[addr] = l
	}
	l.AllowN(now, 1)
}

// clientAddr is the address failures are counted by: the connection's
// remote host (X-Forwarded-For is not trusted).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

type cachedToken struct {
	tok     *model.Token
	expires time.Time
}

type cachedBool struct {
	v       bool
	expires time.Time
}

// maxCachedTokens bounds the cache: beyond it the cache is emptied rather
// than grown, so that nobody can fill memory with lookups.
const maxCachedTokens = 10000

func newAuthenticator(s *Server, mode, adminToken string) *authenticator {
	a := &authenticator{mode: mode, s: s, cache: map[string]cachedToken{}, unknown: map[string]time.Time{},
		touched: map[string]time.Time{}, fails: &failLimiter{m: map[string]*rate.Limiter{}, now: s.now, burst: AuthFailBurst}}
	if a.mode == "" {
		a.mode = AuthAuto
	}
	if adminToken != "" {
		a.adminHash = sha256.Sum256([]byte(adminToken))
		a.hasAdmin = true
	}
	return a
}

// on reports whether requests need a token.
func (a *authenticator) on(ctx context.Context) (bool, error) {
	switch a.mode {
	case AuthOn:
		return true, nil
	case AuthOff:
		return false, nil
	}
	if a.hasAdmin {
		return true, nil
	}
	now := time.Now()
	a.mu.Lock()
	c := a.anyTok
	a.mu.Unlock()
	if c.v || now.Before(c.expires) {
		return c.v, nil // once on, auto stays on
	}
	has, err := a.s.store.HasTokens(ctx)
	if err != nil {
		return true, err
	}
	a.mu.Lock()
	a.anyTok = cachedBool{v: has, expires: now.Add(tokenCacheTTL)}
	a.mu.Unlock()
	return has, nil
}

// tokenCreated turns auto mode on at once on this node, and forgets the
// unknown tokens.
func (a *authenticator) tokenCreated() {
	a.mu.Lock()
	a.anyTok = cachedBool{v: true}
	clear(a.unknown)
	a.mu.Unlock()
}

// forget drops a revoked token from this node's cache.
func (a *authenticator) forget(hash string) {
	a.mu.Lock()
	delete(a.cache, hash)
	a.mu.Unlock()
}

// errNoToken and errBadToken are the two 401s; errExpiredToken is an
// errBadToken.
var (
	errNoToken      = errors.New("authentication required: send Authorization: Bearer <token>")
	errBadToken     = errors.New("invalid or revoked token")
	errExpiredToken = fmt.Errorf("token expired: %w", errBadToken)
)

// authenticate returns the principal of r.
func (a *authenticator) authenticate(r *http.Request) (*principal, error) {
	on, err := a.on(r.Context())
	if err != nil {
		return nil, err
	}
	if !on {
		return openPrincipal, nil
	}
	token, ok := bearer(r)
	if !ok {
		return nil, errNoToken
	}
	if a.hasAdmin {
		given := sha256.Sum256([]byte(token))
		if subtle.ConstantTimeCompare(given[:], a.adminHash[:]) == 1 {
			return &principal{id: AdminTokenName, name: AdminTokenName, role: model.RoleAdmin}, nil
		}
	}
	if !strings.HasPrefix(token, TokenPrefix) {
		return nil, errBadToken
	}
	tok, err := a.lookup(r.Context(), HashToken(token))
	if err != nil {
		return nil, err
	}
	now := a.s.now()
	if tok.Expired(now) {
		return nil, errExpiredToken
	}
	a.used(r.Context(), tok, now)
	return &principal{id: tok.ID, name: tok.Name, role: tok.Role, apps: tok.Apps}, nil
}

// used records that tok authenticated a request at now: LastUsedAt is
// written at most once per TokenUseResolution per token on this node, and
// a failure to write it is logged, not answered.
func (a *authenticator) used(ctx context.Context, tok *model.Token, now time.Time) {
	at := now.UTC().Truncate(TokenUseResolution)
	if !tok.LastUsedAt.Before(at) {
		return
	}
	a.mu.Lock()
	if !a.touched[tok.ID].Before(at) {
		a.mu.Unlock()
		return
	}
	if len(a.touched) >= maxCachedTokens {
		clear(a.touched)
	}
	a.touched[tok.ID] = at
	a.mu.Unlock()
	if err := a.s.store.TouchToken(ctx, tok.ID, at); err != nil {
		a.s.log.Warn("api: token last use not recorded", "token_id", tok.ID, "err", err)
	}
}

func (a *authenticator) lookup(ctx context.Context, hash string) (*model.Token, error) {
	now := time.Now()
	a.mu.Lock()
	c, ok := a.cache[hash]
	unknown := now.Before(a.unknown[hash])
	a.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.tok, nil
	}
	if unknown {
		return nil, errBadToken
	}
	tok, err := a.s.store.TokenByHash(ctx, hash)
	if errors.Is(err, model.ErrNotFound) {
		a.mu.Lock()
		if len(a.unknown) >= maxCachedTokens {
			clear(a.unknown)
		}
		a.unknown[hash] = now.Add(unknownTokenTTL)
		a.mu.Unlock()
		return nil, errBadToken
	}
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if len(a.cache) >= maxCachedTokens {
		clear(a.cache)
	}
	a.cache[hash] = cachedToken{tok: tok, expires: now.Add(tokenCacheTTL)}
	a.mu.Unlock()
	return tok, nil
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// handle registers h on mux for pattern, behind the access check a.
func (s *Server) handle(mux *http.ServeMux, pattern string, a access, h http.Handler) {
	s.patterns = append(s.patterns, pattern)
	mux.Handle(pattern, s.guard(a, h))
}

// guard authenticates the request, checks that its principal may call a
// route of access a, and that a write request's body is JSON.
func (s *Server) guard(a access, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a == accessOpen {
			h.ServeHTTP(w, r)
			return
		}
		addr := clientAddr(r)
		if wait, blocked := s.auth.fails.blocked(addr); blocked {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeError(w, http.StatusTooManyRequests, "", "too many failed authentications from this address; try again later")
			return
		}
		p, err := s.auth.authenticate(r)
		if errors.Is(err, errBadToken) {
			s.auth.fails.failed(addr)
		}
		switch {
		case errors.Is(err, errNoToken):
			w.Header().Set("WWW-Authenticate", `Bearer realm="chime"`)
			writeError(w, http.StatusUnauthorized, "", err.Error())
			return
		case errors.Is(err, errBadToken):
			w.Header().Set("WWW-Authenticate", `Bearer realm="chime", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, "", err.Error())
			return
		case err != nil:
			s.serverError(w, r, err)
			return
		}
		if !p.may(a, r) {
			writeError(w, http.StatusForbidden, "", "this token may not "+r.Method+" "+r.URL.Path)
			return
		}
		if hasBody(r) && !isJSON(r.Header.Get("Content-Type")) {
			writeError(w, http.StatusUnsupportedMediaType, "", "the request body must be sent as Content-Type: application/json")
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// hasBody reports whether r is a write request that carries a body.
func hasBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return r.ContentLength != 0 // -1: unknown (chunked), so a body
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// audit records a change made by r's principal. The change is made by
// then; a failure to record it is logged as an error with the entry.
// Timer saves append theirs in their own transaction (auditEntry).
func (s *env) audit(r *http.Request, action, app, target, detail string) {
	e := s.auditEntry(r, action)
	e.App, e.Target, e.Detail = app, target, detail
	if err := s.audits.AppendAudit(r.Context(), e); err != nil {
		s.log.Error("api: audit entry not recorded", "action", action, "app", app, "target", target,
			"token", e.TokenName, "remote", r.RemoteAddr, "err", err)
	}
}

// auditEntry returns the audit entry of an action of r's principal, its
// app, target and detail left for the caller.
func (s *env) auditEntry(r *http.Request, action string) *model.AuditEntry {
	p := principalOf(r.Context())
	return &model.AuditEntry{
		ID: ulid.Make().String(), At: s.now().UTC(), TokenID: p.id, TokenName: p.name,
		Remote: r.RemoteAddr, Action: action,
	}
}

// DefaultAllowedHosts returns the Host header values a server listening
// on listen accepts by default: on a loopback address, the listen host,
// localhost, 127.0.0.1 and [::1], each with the port (and without it for
// the default port of the scheme); nil otherwise, which accepts any.
func DefaultAllowedHosts(listen string) []string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || !IsLoopback(host) {
		return nil
	}
	var out []string
	for _, h := range []string{host, "localhost", "127.0.0.1", "[::1]"} {
		if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
			h = "[" + h + "]"
		}
		out = append(out, h+":"+port)
	}
	return out
}

// IsLoopback reports whether host (a name or an address, without port)
// is a loopback address or localhost. The empty host (all interfaces) is
// not.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// browserGuard refuses what a browser tricked by another site sends: a
// Host that is not ours (DNS rebinding, 421) and an Origin that is not
// ours nor allowed (cross-site requests, 403). /healthz and /readyz are
// exempt, for probes that name the node by address. Every answer carries
// headers that keep pages out of frames and scripts to our own files.
func (s *Server) browserGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		if r.TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		if len(s.allowedHosts) > 0 && !slices.ContainsFunc(s.allowedHosts, func(a string) bool { return strings.EqualFold(a, r.Host) }) {
			writeError(w, http.StatusMisdirectedRequest, "", "host "+r.Host+" is not served here (see --allowed-hosts)")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o, r) {
			writeError(w, http.StatusForbidden, "", "origin "+o+" is not allowed (see --allowed-origins)")
			return
		}
		if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "cross-site" && hasBody(r) {
			writeError(w, http.StatusForbidden, "", "cross-site requests are not allowed")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ContentSecurityPolicy is sent with every answer: scripts, styles and
// connections only from the server itself, no frames, no plugins.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// originAllowed reports whether origin is the server's own (the scheme
// and Host of r) or one of the allowed origins.
func (s *Server) originAllowed(origin string, r *http.Request) bool {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if strings.EqualFold(origin, scheme+"://"+r.Host) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(s.allowedOrigins, func(a string) bool {
		return strings.EqualFold(strings.TrimRight(a, "/"), u.Scheme+"://"+u.Host)
	})
}
