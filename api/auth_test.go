package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chimehq/chime/api"
	"github.com/chimehq/chime/internal/testenv"
	"github.com/chimehq/chime/model"
)

const rootToken = "root-token-0123456789abcdef"

// request is one HTTP request of the auth tests.
type request struct {
	method, path string
	body         any               // string: sent as is; other: JSON
	header       map[string]string // extra headers
	token        string            // Bearer token; "" sends none
}

// send sends req and returns the status and body.
func (e *env) send(t *testing.T, req request) (int, http.Header, []byte) {
	t.Helper()
	var header []string
	for k, v := range req.header {
		header = append(header, k, v)
	}
	return testenv.Call(t, e.srv.Client(), req.method, e.srv.URL+req.path, req.token, req.body, header...)
}

// mustSend is send that expects status want and decodes into out.
func (e *env) mustSend(t *testing.T, req request, want int, out any) {
	t.Helper()
	code, _, b := e.send(t, req)
	if code != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", req.method, req.path, code, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
	}
}

// newToken creates a token through the API with the root token.
func (e *env) newToken(t *testing.T, name, role string, apps ...string) api.Token {
	t.Helper()
	var tok api.Token
	e.mustSend(t, request{method: "POST", path: "/api/v1/tokens", token: rootToken,
		body: api.TokenRequest{Name: name, Role: role, Apps: apps}}, http.StatusCreated, &tok)
	return tok
}

// withAuth turns authentication on; the tests' clock stands still, so
// failed authentications are not limited but by TestAuthFailureLimit.
func withAuth(c *api.Config) { c.AdminToken = rootToken; c.AuthFailBurst = 1 << 20 }

var seq atomic.Int64

// TestAccessMatrix checks every route for every kind of token: none, an
// invalid one, the bootstrap admin token, admin, write and read tokens,
// and the same three scoped to app billing. Targets in app billing are
// the scoped tokens' own; targets in app ops are another app's.
func TestAccessMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth)
	kinds := []string{"none", "bad", "root", "admin", "write", "read", "admin@b", "write@b", "read@b"}
	tokens := map[string]string{"none": "", "bad": "chm_not-a-token", "root": rootToken}
	for _, k := range kinds[3:] {
		role, app, _ := strings.Cut(k, "@")
		var apps []string
		if app == "b" {
			apps = []string{"billing"}
		}
		tokens[k] = e.newToken(t, k, role, apps...).Token
	}
	// fresh makes a timer of app in the store, through the root token.
	fresh := func(app string) *api.Timer {
		body := validTimer(fmt.Sprintf("m%d", seq.Add(1)))
		body["app"] = app
		var out api.Timer
		e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: body, token: rootToken}, 201, &out)
		return &out
	}
	runOf := func(tm *api.Timer) string {
		var run api.Run
		e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + tm.ID + "/trigger", token: rootToken}, 201, &run)
		return run.ID
	}
	newTimerIn := func(app string) func() request {
		return func() request {
			body := validTimer(fmt.Sprintf("n%d", seq.Add(1)))
			body["app"] = app
			return request{method: "POST", path: "/api/v1/timers", body: body}
		}
	}
	on := func(method, suffix string, body any, app string) func() request {
		return func() request {
			return request{method: method, path: "/api/v1/timers/" + fresh(app).ID + suffix, body: body}
		}
	}
	put := func(app, toApp string) func() request {
		return func() request {
			tm := fresh(app)
			body := validTimer(tm.Name)
			body["app"] = toApp
			return request{method: "PUT", path: "/api/v1/timers/" + tm.ID, body: body}
		}
	}
	get := func(path string) func() request { return func() request { return request{method: "GET", path: path} } }
	backfill := map[string]any{"from": "2026-02-27T00:00:00Z", "to": "2026-02-28T23:00:00Z"}
	revoke := func() request {
		tok := e.newToken(t, "victim", model.RoleRead)
		return request{method: "DELETE", path: "/api/v1/tokens/" + tok.ID}
	}

	// The statuses, in the order of kinds.
	tests := []struct {
		name string
		req  func() request
		want string
	}{
		{"list timers", get("/api/v1/timers"), "401 401 200 200 200 200 200 200 200"},
		{"get own timer", func() request { return request{method: "GET", path: "/api/v1/timers/" + fresh("billing").ID} }, "401 401 200 200 200 200 200 200 200"},
		{"get other app's timer", func() request { return request{method: "GET", path: "/api/v1/timers/" + fresh("ops").ID} }, "401 401 200 200 200 200 404 404 404"},
		{"create in own app", newTimerIn("billing"), "401 401 201 201 201 403 201 201 403"},
		{"create in other app", newTimerIn("ops"), "401 401 201 201 201 403 403 403 403"},
		{"update own", put("billing", "billing"), "401 401 200 200 200 403 200 200 403"},
		{"update other app's", put("ops", "ops"), "401 401 200 200 200 403 404 404 403"},
		{"move own to other app", put("billing", "ops"), "401 401 200 200 200 403 403 403 403"},
		{"delete own", on("DELETE", "", nil, "billing"), "401 401 204 204 204 403 204 204 403"},
		{"delete other app's", on("DELETE", "", nil, "ops"), "401 401 204 204 204 403 404 404 403"},
		{"enable", on("POST", "/enable", nil, "billing"), "401 401 200 200 200 403 200 200 403"},
		{"disable", on("POST", "/disable", nil, "billing"), "401 401 200 200 200 403 200 200 403"},
		{"pause other app's", on("POST", "/pause", nil, "ops"), "401 401 200 200 200 403 404 404 403"},
		{"resume", on("POST", "/resume", nil, "billing"), "401 401 200 200 200 403 200 200 403"},
		{"trigger", on("POST", "/trigger", nil, "billing"), "401 401 201 201 201 403 201 201 403"},
		{"trigger other app's", on("POST", "/trigger", nil, "ops"), "401 401 201 201 201 403 404 404 403"},
		{"backfill", on("POST", "/backfill", backfill, "billing"), "401 401 201 201 201 403 201 201 403"},
		{"list own runs", on("GET", "/runs", nil, "billing"), "401 401 200 200 200 200 200 200 200"},
		{"list other app's runs", on("GET", "/runs", nil, "ops"), "401 401 200 200 200 200 404 404 404"},
		{"get own run", func() request { return request{method: "GET", path: "/api/v1/runs/" + runOf(fresh("billing"))} }, "401 401 200 200 200 200 200 200 200"},
		{"get other app's run", func() request { return request{method: "GET", path: "/api/v1/runs/" + runOf(fresh("ops"))} }, "401 401 200 200 200 200 404 404 404"},
		{"schedule preview", get("/api/v1/schedule/next?spec=@hourly"), "401 401 200 200 200 200 200 200 200"},
		{"action types", get("/api/v1/action-types"), "401 401 200 200 200 200 200 200 200"},
		{"stats", get("/api/v1/stats"), "401 401 200 200 200 200 403 403 403"},
		{"stats series", get("/api/v1/stats/series"), "401 401 200 200 200 200 403 403 403"},
		{"nodes", get("/api/v1/nodes"), "401 401 200 200 200 200 403 403 403"},
		{"list tokens", get("/api/v1/tokens"), "401 401 200 200 403 403 403 403 403"},
		{"create token", func() request {
			return request{method: "POST", path: "/api/v1/tokens", body: api.TokenRequest{Name: "x", Role: "read"}}
		}, "401 401 201 201 403 403 403 403 403"},
		{"revoke token", revoke, "401 401 204 204 403 403 403 403 403"},
		{"audit", get("/api/v1/audit"), "401 401 200 200 403 403 200 200 200"},
		{"metrics", get("/metrics"), "401 401 200 200 200 200 403 403 403"},
		{"healthz", get("/healthz"), "200 200 200 200 200 200 200 200 200"},
		{"readyz", get("/readyz"), "200 200 200 200 200 200 200 200 200"},
		{"openapi", get("/api/v1/openapi.json"), "200 200 200 200 200 200 200 200 200"},
		{"ui", get("/"), "200 200 200 200 200 200 200 200 200"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := strings.Fields(tc.want)
			if len(want) != len(kinds) {
				t.Fatalf("want has %d statuses for %d kinds", len(want), len(kinds))
			}
			for i, k := range kinds {
				req := tc.req()
				req.token = tokens[k]
				code, h, body := e.send(t, req)
				if fmt.Sprint(code) != want[i] {
					t.Errorf("%s: %s %s: status %d, want %s; body %s", k, req.method, req.path, code, want[i], body)
				}
				if code == 401 && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s: 401 without WWW-Authenticate: Bearer (got %q)", k, h.Get("WWW-Authenticate"))
				}
				if code >= 400 && strings.HasPrefix(req.path, "/api/") {
					var eb api.ErrorBody
					if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Message == "" {
						t.Errorf("%s: %d answer is not the error shape: %s", k, code, body)
					}
				}
			}
		})
	}
}

// TestScopedLists: a scoped token's lists leave other apps out.
func TestScopedLists(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth)
	for _, app := range []string{"billing", "ops", "billing"} {
		body := validTimer(fmt.Sprintf("l%d", seq.Add(1)))
		body["app"] = app
		e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: body, token: rootToken}, 201, nil)
	}
	scoped := e.newToken(t, "b", model.RoleRead, "billing").Token
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/api/v1/timers", 2},
		{"/api/v1/timers?app=billing", 2},
		{"/api/v1/timers?app=ops", 0},
	} {
		var list api.TimerList
		e.mustSend(t, request{method: "GET", path: tc.path, token: scoped}, 200, &list)
		if len(list.Timers) != tc.want {
			t.Errorf("GET %s: %d timers, want %d", tc.path, len(list.Timers), tc.want)
		}
		for _, tm := range list.Timers {
			if tm.App != "billing" {
				t.Errorf("GET %s shows a timer of app %s", tc.path, tm.App)
			}
		}
	}
	var audit api.AuditList
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit", token: scoped}, 200, &audit)
	if len(audit.Entries) != 2 {
		t.Errorf("scoped audit: %d entries, want the 2 of billing", len(audit.Entries))
	}
	for _, en := range audit.Entries {
		if en.App != "billing" {
			t.Errorf("scoped audit shows %+v", en)
		}
	}
}

// TestTokens: a token is shown once with prefix chm_, listed without its
// secret, works at once, and stops working on revocation.
func TestTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth)
	code, _, raw := e.send(t, request{method: "POST", path: "/api/v1/tokens", token: rootToken,
		body: map[string]any{"name": "ci", "role": "write", "apps": []string{"billing"}}})
	if code != 201 {
		t.Fatalf("create: %d %s", code, raw)
	}
	var created map[string]any
	json.Unmarshal(raw, &created)
	for _, k := range []string{"id", "name", "role", "apps", "created_at", "token"} {
		if _, ok := created[k]; !ok {
			t.Errorf("create answer lacks %q: %s", k, raw)
		}
	}
	secret, _ := created["token"].(string)
	if !strings.HasPrefix(secret, "chm_") || len(secret) < 40 {
		t.Errorf("token %q: want chm_ and at least 32 random bytes", secret)
	}
	code, _, raw = e.send(t, request{method: "GET", path: "/api/v1/tokens", token: rootToken})
	if code != 200 || strings.Contains(string(raw), secret) || strings.Contains(string(raw), api.HashToken(secret)) {
		t.Errorf("list: %d %s: must not hold the secret or its hash", code, raw)
	}
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers", token: secret}, 200, nil)
	e.mustSend(t, request{method: "DELETE", path: "/api/v1/tokens/" + created["id"].(string), token: rootToken}, 204, nil)
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers", token: secret}, 401, nil)
	e.mustSend(t, request{method: "DELETE", path: "/api/v1/tokens/" + created["id"].(string), token: rootToken}, 404, nil)

	for _, tc := range []struct {
		body  any
		field string
	}{
		{map[string]any{"role": "read"}, "name"},
		{map[string]any{"name": "x", "role": "owner"}, "role"},
		{map[string]any{"name": "x", "role": "read", "apps": []string{"bad app"}}, "apps[0]"},
		{map[string]any{"name": "x", "role": "read", "colour": 1}, "colour"},
	} {
		code, _, raw := e.send(t, request{method: "POST", path: "/api/v1/tokens", token: rootToken, body: tc.body})
		var eb api.ErrorBody
		json.Unmarshal(raw, &eb)
		if code != 400 || eb.Error.Field != tc.field {
			t.Errorf("create %v: %d %s, want 400 on %s", tc.body, code, raw, tc.field)
		}
	}
}

// TestAutoAuth: with no admin token, a loopback server is open until the
// first token is created, and then requires one.
func TestAutoAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers"}, 200, nil)
	var tok api.Token
	e.mustSend(t, request{method: "POST", path: "/api/v1/tokens", body: api.TokenRequest{Name: "first", Role: "admin"}}, 201, &tok)
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers"}, 401, nil)
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers", token: tok.Token}, 200, nil)
	e.mustSend(t, request{method: "GET", path: "/metrics"}, 401, nil)

	pub := newEnv(t, withAuth, func(c *api.Config) { c.MetricsPublic = true })
	pub.mustSend(t, request{method: "GET", path: "/metrics"}, 200, nil)
	off := newEnv(t, func(c *api.Config) { c.Auth = api.AuthOff; c.AdminToken = rootToken })
	off.mustSend(t, request{method: "GET", path: "/api/v1/tokens"}, 200, nil)
}

// TestBrowserChecks: the Host, Origin and Content-Type rules that stop
// DNS rebinding and cross-site requests, with auth off (the loopback
// default) so that only they decide.
func TestBrowserChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) {
		c.AllowedOrigins = []string{"https://console.example.com"}
	})
	host := strings.TrimPrefix(e.srv.URL, "http://")
	_, port, _ := strings.Cut(host, ":")
	hosts := newEnv(t, func(c *api.Config) { c.AllowedHosts = api.DefaultAllowedHosts(host) })
	body := validTimer("b1")
	for _, tc := range []struct {
		name string
		e    *env
		req  request
		want int
	}{
		{"json create", e, request{method: "POST", path: "/api/v1/timers", body: validTimer("j1")}, 201},
		{"text/plain create (a cross-site form)", e, request{method: "POST", path: "/api/v1/timers", body: `{"app":"a"}`,
			header: map[string]string{"Content-Type": "text/plain"}}, 415},
		{"form create", e, request{method: "POST", path: "/api/v1/timers", body: "app=a",
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415},
		{"json with charset", e, request{method: "POST", path: "/api/v1/timers", body: validTimer("j2"),
			header: map[string]string{"Content-Type": "application/json; charset=utf-8"}}, 201},
		{"no body needs no type", e, request{method: "GET", path: "/api/v1/timers", header: map[string]string{"Content-Type": "text/plain"}}, 200},
		{"foreign origin", e, request{method: "POST", path: "/api/v1/timers", body: body,
			header: map[string]string{"Origin": "https://evil.example"}}, 403},
		{"foreign origin GET", e, request{method: "GET", path: "/api/v1/timers", header: map[string]string{"Origin": "https://evil.example"}}, 403},
		{"null origin", e, request{method: "POST", path: "/api/v1/timers", body: body, header: map[string]string{"Origin": "null"}}, 403},
		{"own origin", e, request{method: "POST", path: "/api/v1/timers", body: validTimer("o1"),
			header: map[string]string{"Origin": e.srv.URL}}, 201},
		{"allowed origin", e, request{method: "POST", path: "/api/v1/timers", body: validTimer("o2"),
			header: map[string]string{"Origin": "https://console.example.com"}}, 201},
		{"cross-site fetch without origin", e, request{method: "POST", path: "/api/v1/timers", body: body,
			header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, 403},
		{"rebound host", hosts, request{method: "GET", path: "/api/v1/timers", header: map[string]string{"Host": "evil.example:" + port}}, 421},
		{"rebound host, no port", hosts, request{method: "GET", path: "/", header: map[string]string{"Host": "evil.example"}}, 421},
		{"localhost", hosts, request{method: "GET", path: "/api/v1/timers", header: map[string]string{"Host": "localhost:" + port}}, 200},
		{"127.0.0.1", hosts, request{method: "GET", path: "/api/v1/timers", header: map[string]string{"Host": "127.0.0.1:" + port}}, 200},
		{"[::1]", hosts, request{method: "GET", path: "/api/v1/timers", header: map[string]string{"Host": "[::1]:" + port}}, 200},
		{"probe by any host", hosts, request{method: "GET", path: "/healthz", header: map[string]string{"Host": "10.1.2.3:" + port}}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, h, raw := tc.e.send(t, tc.req)
			if code != tc.want {
				t.Errorf("status %d, want %d; body %s", code, tc.want, raw)
			}
			if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") {
				t.Errorf("headers: X-Frame-Options %q, CSP %q", h.Get("X-Frame-Options"), h.Get("Content-Security-Policy"))
			}
		})
	}
}

// TestAuditEntries: a create, update and delete sequence leaves three
// entries naming the token, the app, the target and the remote address.
func TestAuditEntries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth)
	tok := e.newToken(t, "deployer", model.RoleWrite)
	var tm api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: validTimer("a1"), token: tok.Token}, 201, &tm)
	upd := validTimer("a1")
	upd["description"] = "changed"
	e.mustSend(t, request{method: "PUT", path: "/api/v1/timers/" + tm.ID, body: upd, token: tok.Token}, 200, nil)
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + tm.ID + "/trigger", token: rootToken}, 201, nil)
	e.mustSend(t, request{method: "DELETE", path: "/api/v1/timers/" + tm.ID, token: tok.Token}, 204, nil)

	var list api.AuditList
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit?target=" + tm.ID, token: rootToken}, 200, &list)
	var got []string
	for _, en := range list.Entries {
		got = append(got, en.Action+" by "+en.TokenName)
		if en.App != "billing" || en.Target != tm.ID || !strings.HasPrefix(en.Remote, "127.0.0.1:") || en.At.IsZero() || en.TokenID == "" {
			t.Errorf("entry %+v", en)
		}
	}
	want := "[timer.delete by deployer timer.trigger by admin timer.update by deployer timer.create by deployer]"
	if fmt.Sprint(got) != want {
		t.Errorf("audit = %v, want %s", got, want)
	}
	// Token management is audited too, and pages.
	e.mustSend(t, request{method: "DELETE", path: "/api/v1/tokens/" + tok.ID, token: rootToken}, 204, nil)
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit?limit=1", token: rootToken}, 200, &list)
	if len(list.Entries) != 1 || list.Entries[0].Action != "token.revoke" || list.Entries[0].Target != tok.ID || list.NextCursor == "" {
		t.Fatalf("latest entry = %+v, cursor %q", list.Entries, list.NextCursor)
	}
	var page2 api.AuditList
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit?limit=1&cursor=" + list.NextCursor, token: rootToken}, 200, &page2)
	if len(page2.Entries) != 1 || page2.Entries[0].Action != "timer.delete" {
		t.Errorf("page 2 = %+v", page2.Entries)
	}
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit?cursor=junk", token: rootToken}, 400, nil)
}
