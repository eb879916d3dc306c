package api_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/model"
)

// TestNodeHandlersNeedAdmin: a timer running a handler that acts on the
// node is saved, triggered and backfilled only by an admin token or in an
// app of BuiltinsApps; any other token is answered 403 naming the handler.
func TestNodeHandlersNeedAdmin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth, func(c *api.Config) {
		c.NodeHandlers = []string{"backup_database"}
		c.BuiltinsApps = []string{"ops"}
		c.HandlerExists = func(string) bool { return true }
	})
	backup := func(app, name string) map[string]any {
		body := validTimer(name)
		body["app"] = app
		body["action"] = map[string]any{"type": "handler", "handler": map[string]any{"name": "backup_database"}}
		return body
	}
	writer := e.newToken(t, "writer", model.RoleWrite).Token
	scopedAdmin := e.newToken(t, "billing-admin", model.RoleAdmin, "billing").Token
	for _, tc := range []struct {
		name, token, app string
		want             int
	}{
		{"write token", writer, "billing", 403},
		{"admin scoped to the app", scopedAdmin, "billing", 403},
		{"admin token", rootToken, "billing", 201},
		{"write token in a builtins app", writer, "ops", 201},
	} {
		code, _, b := e.send(t, request{method: "POST", path: "/api/v1/timers", token: tc.token, body: backup(tc.app, "bk-"+strings.ReplaceAll(tc.name, " ", "-"))})
		if code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, code, b, tc.want)
		}
		if code == 403 && (!strings.Contains(string(b), `"field":"action.handler.name"`) || !strings.Contains(string(b), "backup_database")) {
			t.Errorf("%s: %s, want the handler named", tc.name, b)
		}
	}
	// A write token may not re-aim an admin's timer, nor fire it.
	var tm api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", token: rootToken, body: backup("billing", "bk-admin")}, 201, &tm)
	e.mustSend(t, request{method: "PUT", path: "/api/v1/timers/" + tm.ID, token: writer, body: backup("billing", "bk-admin")}, 403, nil)
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + tm.ID + "/trigger", token: writer}, 403, nil)
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + tm.ID + "/backfill", token: writer,
		body: map[string]any{"from": "2025-01-01T00:00:00Z", "to": "2025-01-02T00:00:00Z"}}, 403, nil)
	// Other handlers are not concerned.
	other := validTimer("other-handler")
	other["action"] = map[string]any{"type": "handler", "handler": map[string]any{"name": "cleanup"}}
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", token: writer, body: other}, 201, nil)
}

// TestRunsPerRequestBound: a backfill whose fires times the runs each
// fire splits into exceed api.MaxRunsPerRequest is refused, naming the
// product; at the bound it runs.
func TestRunsPerRequestBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth)
	body := validTimer("fan-out")
	body["shards"] = 1000
	var tm api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: body, token: rootToken}, 201, &tm)
	path := "/api/v1/timers/" + tm.ID + "/backfill"

	// Daily fires: 20 days are 20 fires of 1000 shards.
	code, _, b := e.send(t, request{method: "POST", path: path, token: rootToken,
		body: map[string]any{"from": "2025-01-01T00:00:00Z", "to": "2025-01-20T23:00:00Z"}})
	if code != 400 || !strings.Contains(string(b), "shards (1000) × fires (20) = 20000 runs exceeds 10000") || !strings.Contains(string(b), `"field":"to"`) {
		t.Errorf("backfill of 20 000 runs: %d %s, want 400 naming the product", code, b)
	}
	var out api.BackfillResponse
	e.mustSend(t, request{method: "POST", path: path, token: rootToken,
		body: map[string]any{"from": "2025-01-01T00:00:00Z", "to": "2025-01-10T23:00:00Z"}}, 201, &out)
	if out.Count != 10 {
		t.Errorf("backfill of 10 fires made %d", out.Count)
	}
	// A trigger is one fire: 1000 runs at most.
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + tm.ID + "/trigger", token: rootToken}, 201, nil)
}

// tokenStore counts the token lookups and last-use writes of a store.
type tokenStore struct {
	api.Store
	byHash, touches atomic.Int64
}

func (s *tokenStore) TokenByHash(ctx context.Context, hash string) (*model.Token, error) {
	s.byHash.Add(1)
	return s.Store.TokenByHash(ctx, hash)
}

func (s *tokenStore) TouchToken(ctx context.Context, id string, at time.Time) error {
	s.touches.Add(1)
	return s.Store.TouchToken(ctx, id, at)
}

// movableEnv is an env with auth whose clock the test moves, over a
// tokenStore.
func movableEnv(t *testing.T) (*env, *tokenStore, func(time.Duration)) {
	var now atomic.Int64
	now.Store(testNow.UnixNano())
	var ts *tokenStore
	e := newEnv(t, withAuth, func(c *api.Config) {
		ts = &tokenStore{Store: c.Store}
		c.Store = ts
		c.AuthFailBurst = 0 // the default
		c.Clock = clock.Func(func() time.Time { return time.Unix(0, now.Load()).UTC() })
	})
	return e, ts, func(d time.Duration) { now.Add(int64(d)) }
}

// TestTokenExpiryAndLastUse: a token created with a ttl or an expires_at
// works until then and is refused after (401); its last use is recorded
// to the minute, written at most once a minute, and listed.
func TestTokenExpiryAndLastUse(t *testing.T) {
	t.Parallel()
	e, ts, tick := movableEnv(t)
	var tok api.Token
	e.mustSend(t, request{method: "POST", path: "/api/v1/tokens", token: rootToken,
		body: map[string]any{"name": "temp", "role": "read", "ttl": "1h"}}, 201, &tok)
	if tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(testNow.Add(time.Hour)) {
		t.Fatalf("expires_at = %v, want %v", tok.ExpiresAt, testNow.Add(time.Hour))
	}
	var at api.Token
	e.mustSend(t, request{method: "POST", path: "/api/v1/tokens", token: rootToken,
		body: map[string]any{"name": "dated", "role": "read", "expires_at": testNow.Add(time.Minute).Format(time.RFC3339)}}, 201, &at)
	if at.ExpiresAt == nil || !at.ExpiresAt.Equal(testNow.Add(time.Minute)) {
		t.Fatalf("expires_at = %v, want %v", at.ExpiresAt, testNow.Add(time.Minute))
	}

	for range 20 {
		e.mustSend(t, request{method: "GET", path: "/api/v1/timers", token: tok.Token}, 200, nil)
	}
	if n := ts.touches.Load(); n != 1 {
		t.Errorf("%d last-use writes for 20 requests within a minute, want 1", n)
	}
	lastUse := func(id string) *time.Time {
		var list api.TokenList
		e.mustSend(t, request{method: "GET", path: "/api/v1/tokens", token: rootToken}, 200, &list)
		for _, x := range list.Tokens {
			if x.ID == id {
				return x.LastUsedAt
			}
		}
		t.Fatalf("token %s not listed", id)
		return nil
	}
	if got := lastUse(tok.ID); got == nil || !got.Equal(testNow.Truncate(time.Minute)) {
		t.Errorf("last_used_at = %v, want %v", got, testNow.Truncate(time.Minute))
	}
	if got := lastUse(at.ID); got != nil {
		t.Errorf("last_used_at of a token never used = %v, want none", got)
	}
	tick(90 * time.Second)
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers", token: tok.Token}, 200, nil)
	if got := lastUse(tok.ID); got == nil || !got.Equal(testNow.Add(90*time.Second).Truncate(time.Minute)) {
		t.Errorf("last_used_at a minute later = %v", got)
	}

	// The dated one expired by now; the other does an hour after its creation.
	code, _, b := e.send(t, request{method: "GET", path: "/api/v1/timers", token: at.Token})
	if code != 401 || !strings.Contains(string(b), "expired") {
		t.Errorf("expired token: %d %s, want 401 saying so", code, b)
	}
	tick(time.Hour)
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers", token: tok.Token}, 401, nil)

	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"name": "x", "role": "read", "ttl": "1h", "expires_at": "2030-01-01T00:00:00Z"}, "ttl"},
		{map[string]any{"name": "x", "role": "read", "ttl": "-1h"}, "ttl"},
		{map[string]any{"name": "x", "role": "read", "ttl": "forever"}, "ttl"},
		{map[string]any{"name": "x", "role": "read", "expires_at": "2020-01-01T00:00:00Z"}, "expires_at"},
	} {
		code, _, b := e.send(t, request{method: "POST", path: "/api/v1/tokens", token: rootToken, body: tc.body})
		if code != 400 || !strings.Contains(string(b), `"field":"`+tc.field+`"`) {
			t.Errorf("%v: %d %s, want 400 on %s", tc.body, code, b, tc.field)
		}
	}
}

// TestAuthFailureLimit: an address that presented AuthFailBurst bad tokens
// is answered 429 with Retry-After, even with a good token, until its
// bucket refills (AuthFailRate a second).
func TestAuthFailureLimit(t *testing.T) {
	t.Parallel()
	e, _, tick := movableEnv(t)
	bad := api.TokenPrefix + "not-a-token"
	for i := range api.AuthFailBurst {
		if code, _, b := e.send(t, request{method: "GET", path: "/api/v1/timers", token: bad}); code != 401 {
			t.Fatalf("bad token %d: %d %s, want 401", i, code, b)
		}
	}
	for _, tok := range []string{bad, rootToken} {
		code, h, b := e.send(t, request{method: "GET", path: "/api/v1/timers", token: tok})
		if code != 429 || h.Get("Retry-After") != "1" {
			t.Errorf("after %d failures: %d Retry-After %q %s, want 429 with Retry-After 1", api.AuthFailBurst, code, h.Get("Retry-After"), b)
		}
	}
	tick(time.Second / api.AuthFailRate)
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers", token: rootToken}, 200, nil)
	// Open routes are not limited.
	e.mustSend(t, request{method: "GET", path: "/healthz", token: bad}, 200, nil)
}

// TestUnknownTokenCache: a token found in no token is answered from the
// node's memory, without a store lookup, until a token is created.
func TestUnknownTokenCache(t *testing.T) {
	t.Parallel()
	e, ts, _ := movableEnv(t)
	bad := api.TokenPrefix + "unknown"
	for range 5 {
		e.mustSend(t, request{method: "GET", path: "/api/v1/timers", token: bad}, 401, nil)
	}
	if n := ts.byHash.Load(); n != 1 {
		t.Errorf("%d store lookups for 5 requests with one unknown token, want 1", n)
	}
	e.newToken(t, "fresh", model.RoleRead)
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers", token: bad}, 401, nil)
	if n := ts.byHash.Load(); n != 2 {
		t.Errorf("%d store lookups after a token was created, want 2", n)
	}
}
