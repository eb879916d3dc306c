package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/base/testenv"
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

// TestAccessMatrix checks every route for every kind of caller: no token,
// an invalid one, the bootstrap admin token, admin, write and read tokens,
// the same three scoped to app billing, and a write token scoped to app
// ops (another app's). Every target is in app billing: the @b tokens'
// own, write@o's another app's.
//
// The routes come from the server's route table (Server.Patterns): a
// route without a row here fails the test, and so does a row whose route
// is gone. Adding a route means adding one line to rows: its pattern as
// registered, a request builder (get, on, app, or a func of your own; a
// builder makes fresh targets at each call, through the root token) and
// the statuses it answers, one per kind, in the order of kinds. A route
// may have several rows (different bodies or targets), named by their
// third field.
func TestAccessMatrix(t *testing.T) {
	t.Parallel()
	var cfg api.Config
	e := newEnv(t, withAuth, func(c *api.Config) { cfg = *c })
	kinds := []string{"none", "bad", "root", "admin", "write", "read", "admin@b", "write@b", "read@b", "write@o"}
	tokens := map[string]string{"none": "", "bad": "chm_not-a-token", "root": rootToken}
	for _, k := range kinds[3:] {
		role, app, _ := strings.Cut(k, "@")
		var apps []string
		switch app {
		case "b":
			apps = []string{"billing"}
		case "o":
			apps = []string{"ops"}
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
	// rerun: a rerun of an ended run of a fresh billing timer.
	rerun := func() request {
		return request{method: "POST", path: "/api/v1/runs/" + e.endedRun(t, fresh("billing").ID) + "/rerun"}
	}
	newTimerIn := func(app string) func() request {
		return func() request {
			body := validTimer(fmt.Sprintf("n%d", seq.Add(1)))
			body["app"] = app
			return request{method: "POST", path: "/api/v1/timers", body: body}
		}
	}
	// on: method on a fresh billing timer's path + suffix.
	on := func(method, suffix string, body any) func() request {
		return func() request {
			return request{method: method, path: "/api/v1/timers/" + fresh("billing").ID + suffix, body: body}
		}
	}
	put := func(toApp string) func() request {
		return func() request {
			tm := fresh("billing")
			body := validTimer(tm.Name)
			body["app"] = toApp
			return request{method: "PUT", path: "/api/v1/timers/" + tm.ID, body: body}
		}
	}
	get := func(path string) func() request { return func() request { return request{method: "GET", path: path} } }
	// app: method on app billing's path + suffix.
	app := func(method, suffix string, body any) func() request {
		return func() request { return request{method: method, path: "/api/v1/apps/billing" + suffix, body: body} }
	}
	backfill := map[string]any{"from": "2026-02-27T00:00:00Z", "to": "2026-02-28T23:00:00Z"}
	batch := func() request {
		return request{method: "POST", path: "/api/v1/timers:batch", body: map[string]any{"action": "pause", "ids": []string{fresh("billing").ID}}}
	}
	notify := map[string]any{"notify": []map[string]any{{"on": "failure", "webhook": map[string]any{"url": "https://hooks.example.com/chime"}}}}
	revoke := func() request {
		tok := e.newToken(t, "victim", model.RoleRead)
		return request{method: "DELETE", path: "/api/v1/tokens/" + tok.ID}
	}

	//                                                                   none bad root admin write read admin@b write@b read@b write@o
	rows := []struct {
		route, name string
		req         func() request
		want        string
	}{
		{"POST /api/v1/timers", "in billing", newTimerIn("billing"), "401 401 201 201 201 403 201 201 403 403"},
		{"POST /api/v1/timers", "in ops", newTimerIn("ops"), "401 401 201 201 201 403 403 403 403 201"},
		{"POST /api/v1/timers:batch", "", batch, "401 401 200 200 200 403 200 200 403 200"},
		{"GET /api/v1/timers", "", get("/api/v1/timers"), "401 401 200 200 200 200 200 200 200 200"},
		{"GET /api/v1/timers:counts", "", get("/api/v1/timers:counts"), "401 401 200 200 200 200 200 200 200 200"},
		{"GET /api/v1/timers/{id}", "", on("GET", "", nil), "401 401 200 200 200 200 200 200 200 404"},
		{"PUT /api/v1/timers/{id}", "same app", put("billing"), "401 401 200 200 200 403 200 200 403 404"},
		{"PUT /api/v1/timers/{id}", "move to ops", put("ops"), "401 401 200 200 200 403 403 403 403 404"},
		{"DELETE /api/v1/timers/{id}", "", on("DELETE", "", nil), "401 401 204 204 204 403 204 204 403 404"},
		{"POST /api/v1/timers/{id}/enable", "", on("POST", "/enable", nil), "401 401 200 200 200 403 200 200 403 404"},
		{"POST /api/v1/timers/{id}/disable", "", on("POST", "/disable", nil), "401 401 200 200 200 403 200 200 403 404"},
		{"POST /api/v1/timers/{id}/trigger", "", on("POST", "/trigger", nil), "401 401 201 201 201 403 201 201 403 404"},
		{"POST /api/v1/timers/{id}/pause", "", on("POST", "/pause", nil), "401 401 200 200 200 403 200 200 403 404"},
		{"POST /api/v1/timers/{id}/resume", "", on("POST", "/resume", nil), "401 401 200 200 200 403 200 200 403 404"},
		{"POST /api/v1/timers/{id}/backfill", "", on("POST", "/backfill", backfill), "401 401 201 201 201 403 201 201 403 404"},
		{"GET /api/v1/timers/{id}/runs", "", on("GET", "/runs", nil), "401 401 200 200 200 200 200 200 200 404"},
		{"GET /api/v1/timers/{id}/graph", "", on("GET", "/graph", nil), "401 401 200 200 200 200 200 200 200 404"},
		{"GET /api/v1/timers/{id}/next", "", on("GET", "/next", nil), "401 401 200 200 200 200 200 200 200 404"},
		{"GET /api/v1/runs", "", get("/api/v1/runs?app=billing&status=failed"), "401 401 200 200 200 200 200 200 200 200"},
		{"GET /api/v1/runs", "a timer", func() request { return request{method: "GET", path: "/api/v1/runs?timer=" + fresh("billing").ID} }, "401 401 200 200 200 200 200 200 200 404"},
		{"GET /api/v1/runs/counts", "", get("/api/v1/runs/counts?app=billing"), "401 401 200 200 200 200 200 200 200 200"},
		{"GET /api/v1/runs/{id}", "", func() request { return request{method: "GET", path: "/api/v1/runs/" + runOf(fresh("billing"))} }, "401 401 200 200 200 200 200 200 200 404"},
		{"POST /api/v1/runs/{id}/rerun", "", rerun, "401 401 201 201 201 403 201 201 403 404"},
		{"GET /api/v1/schedule/next", "", get("/api/v1/schedule/next?spec=@hourly"), "401 401 200 200 200 200 200 200 200 200"},
		{"GET /api/v1/action-types", "", get("/api/v1/action-types"), "401 401 200 200 200 200 200 200 200 200"},
		{"GET /api/v1/stats", "", get("/api/v1/stats"), "401 401 200 200 200 200 403 403 403 403"},
		{"GET /api/v1/stats/series", "", get("/api/v1/stats/series"), "401 401 200 200 200 200 403 403 403 403"},
		{"GET /api/v1/nodes", "", get("/api/v1/nodes"), "401 401 200 200 200 200 403 403 403 403"},
		{"POST /api/v1/tokens", "", func() request {
			return request{method: "POST", path: "/api/v1/tokens", body: api.TokenRequest{Name: "x", Role: "read"}}
		}, "401 401 201 201 403 403 403 403 403 403"},
		{"GET /api/v1/tokens", "", get("/api/v1/tokens"), "401 401 200 200 403 403 403 403 403 403"},
		{"DELETE /api/v1/tokens/{id}", "", revoke, "401 401 204 204 403 403 403 403 403 403"},
		{"GET /api/v1/audit", "", get("/api/v1/audit"), "401 401 200 200 403 403 200 200 200 200"},
		{"GET /api/v1/apps/{app}/signing-secret", "", app("GET", "/signing-secret", nil), "401 401 200 200 200 403 200 200 403 403"},
		{"POST /api/v1/apps/{app}/signing-secret/rotate", "", app("POST", "/signing-secret/rotate", nil), "401 401 201 201 201 403 201 201 403 403"},
		{"POST /api/v1/apps/{app}/pause", "", app("POST", "/pause", nil), "401 401 200 200 200 403 200 200 403 403"},
		{"POST /api/v1/apps/{app}/resume", "", app("POST", "/resume", nil), "401 401 200 200 200 403 200 200 403 403"},
		{"GET /api/v1/apps/{app}/notify", "", app("GET", "/notify", nil), "401 401 200 200 200 403 200 200 403 403"},
		{"PUT /api/v1/apps/{app}/notify", "", app("PUT", "/notify", notify), "401 401 200 200 200 403 200 200 403 403"},
		{"GET /api/v1/openapi.json", "", get("/api/v1/openapi.json"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /healthz", "", get("/healthz"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /readyz", "", get("/readyz"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /{$}", "", get("/"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /timers", "", get("/timers"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /timers/new", "", get("/timers/new"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /timers/{id}", "", get("/timers/01ABC"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /timers/{id}/edit", "", get("/timers/01ABC/edit"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /runs", "", get("/runs"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /runs/{id}", "", get("/runs/01ABC"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /nodes", "", get("/nodes"), "200 200 200 200 200 200 200 200 200 200"},
		{"GET /metrics", "", get("/metrics"), "401 401 200 200 200 200 403 403 403 403"},
		{"GET /ui/", "", get("/ui/app.js"), "200 200 200 200 200 200 200 200 200 200"},
		{"PUT /api/v1/apps/{app}/secrets/{name}", "own app", func() request {
			return request{method: "PUT", path: "/api/v1/apps/billing/secrets/K", body: map[string]any{"value": "v", "hosts": []string{"a.test"}}}
		}, "401 401 200 200 200 403 200 200 403 403"},
		{"PUT /api/v1/apps/{app}/secrets/{name}", "other app", func() request {
			return request{method: "PUT", path: "/api/v1/apps/ops/secrets/K", body: map[string]any{"value": "v", "hosts": []string{"a.test"}}}
		}, "401 401 200 200 200 403 403 403 403 200"},
		{"GET /api/v1/apps/{app}/secrets", "own app", get("/api/v1/apps/billing/secrets"), "401 401 200 200 200 403 200 200 403 403"},
		{"GET /api/v1/apps/{app}/secrets", "other app", get("/api/v1/apps/ops/secrets"), "401 401 200 200 200 403 403 403 403 200"},
		{"DELETE /api/v1/apps/{app}/secrets/{name}", "", func() request {
			e.mustSend(t, request{method: "PUT", path: "/api/v1/apps/billing/secrets/D", token: rootToken,
				body: map[string]any{"value": "v", "hosts": []string{"a.test"}}}, 200, nil)
			return request{method: "DELETE", path: "/api/v1/apps/billing/secrets/D"}
		}, "401 401 204 204 204 403 204 204 403 403"},
	}

	routes := map[string]bool{}
	for _, p := range api.New(cfg).Patterns() {
		routes[p] = true
	}
	covered := map[string]bool{}
	for _, row := range rows {
		covered[row.route] = true
		if !routes[row.route] {
			t.Errorf("row %q: no route %q is registered (a stale row?)", row.name, row.route)
		}
	}
	for _, p := range api.New(cfg).Patterns() {
		if !covered[p] {
			t.Errorf("route %q has no row in TestAccessMatrix: add one", p)
		}
	}
	for _, row := range rows {
		name := row.route
		if row.name != "" {
			name += " " + row.name
		}
		t.Run(name, func(t *testing.T) {
			want := strings.Fields(row.want)
			if len(want) != len(kinds) {
				t.Fatalf("want has %d statuses for %d kinds", len(want), len(kinds))
			}
			for i, k := range kinds {
				req := row.req()
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
