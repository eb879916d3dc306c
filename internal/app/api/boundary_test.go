package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/app/api/apitest"
	"github.com/chimehq/chime/internal/app/builtin"
	"github.com/chimehq/chime/model"
)

// boundaryEnv is a server with auth on, a write and a read token scoped to
// app billing, and a timer of app ops (hidden) that they may not see.
type boundaryEnv struct {
	*env
	write, read string
	hidden      api.Timer
}

// missingID is a timer id that no timer has, as long as a real one.
const missingID = "01JZZZZZZZZZZZZZZZZZZZZZZZ"

func newBoundaryEnv(t *testing.T, mod ...func(*api.Config)) *boundaryEnv {
	t.Helper()
	e := &boundaryEnv{env: newEnv(t, append([]func(*api.Config){withAuth}, mod...)...)}
	e.write = e.newToken(t, "billing-deployer", model.RoleWrite, "billing").Token
	e.read = e.newToken(t, "billing-viewer", model.RoleRead, "billing").Token
	e.hidden = e.rootTimer(t, "ops", "hidden", nil)
	return e
}

// rootTimer creates app/name through the root token, running after the
// timers of after (app/name or ids) as well as on its schedule.
func (e *boundaryEnv) rootTimer(t *testing.T, app, name string, after []string) api.Timer {
	t.Helper()
	body := validTimer(name)
	body["app"] = app
	if len(after) > 0 {
		body["after"] = afterList(after...)
	}
	var out api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: body, token: rootToken}, 201, &out)
	return out
}

func afterList(refs ...string) []map[string]any {
	var out []map[string]any
	for _, r := range refs {
		out = append(out, map[string]any{"timer": r, "on": "success"})
	}
	return out
}

// TestAppBoundarySameAsMissing: for a token scoped to billing, every
// route that takes a timer answers for another app's timer exactly what
// it answers for a timer that does not exist (the reference itself
// aside), and never shows the other timer's id or name.
func TestAppBoundarySameAsMissing(t *testing.T) {
	t.Parallel()
	e := newBoundaryEnv(t)
	createAfter := func(ref string) request {
		body := validTimer(fmt.Sprintf("after%d", seq.Add(1)))
		body["after"] = afterList(ref)
		return request{method: "POST", path: "/api/v1/timers", body: body}
	}
	// The second entry names the hidden timer by id after the first
	// names it by name: a duplicate must not be what gives it away.
	createAfterTwice := func(ref string) request {
		body := validTimer(fmt.Sprintf("after%d", seq.Add(1)))
		other := missingID
		if ref == "ops/hidden" {
			other = e.hidden.ID
		}
		body["after"] = afterList(ref, other)
		return request{method: "POST", path: "/api/v1/timers", body: body}
	}
	own := e.rootTimer(t, "billing", "own", nil)
	updateAfter := func(ref string) request {
		body := validTimer(own.Name)
		body["after"] = afterList(ref)
		return request{method: "PUT", path: "/api/v1/timers/" + own.ID, body: body}
	}
	// A timer of ops named like the one created: "cannot run after
	// itself" must not tell that ops/hidden exists either.
	createSelf := func(ref string) request {
		_, name, _ := strings.Cut(ref, "/")
		body := validTimer(name)
		body["app"] = "ops"
		body["after"] = afterList(ref)
		return request{method: "POST", path: "/api/v1/timers", body: body}
	}
	on := func(method, suffix string, body any) func(string) request {
		return func(id string) request {
			return request{method: method, path: "/api/v1/timers/" + url.PathEscape(id) + suffix, body: body}
		}
	}
	batch := func(action string) func(string) request {
		return func(id string) request {
			return request{method: "POST", path: "/api/v1/timers:batch", body: map[string]any{"action": action, "ids": []string{id}}}
		}
	}
	batchFilter := func(app string) request {
		return request{method: "POST", path: "/api/v1/timers:batch", body: map[string]any{"action": "pause", "filter": map[string]any{"app": app}}}
	}
	appRoute := func(suffix string) func(string) request {
		return func(app string) request { return request{method: "GET", path: "/api/v1/apps/" + app + suffix} }
	}
	get := func(prefix string) func(string) request {
		return func(ref string) request { return request{method: "GET", path: prefix + ref} }
	}
	for _, tc := range []struct {
		name   string
		byName bool // the reference is app/name, else an id
		req    func(ref string) request
		token  string
		apps   bool // the reference is an app: ops, or one without timers
	}{
		{"batch filter", false, batchFilter, e.write, true},
		{"signing secret", false, appRoute("/signing-secret"), e.write, true},
		{"notify", false, appRoute("/notify"), e.write, true},
		{"timer list", false, get("/api/v1/timers?app="), e.read, true},
		{"audit by app", false, get("/api/v1/audit?app="), e.read, true},
		{"audit by target", false, get("/api/v1/audit?target="), e.read, false},
		{"after by name", true, createAfter, e.write, false},
		{"after by id", false, createAfter, e.write, false},
		{"after twice", true, createAfterTwice, e.write, false},
		{"update after by name", true, updateAfter, e.write, false},
		{"after itself in another app", true, createSelf, e.write, false},
		{"get", false, on("GET", "", nil), e.read, false},
		{"graph", false, on("GET", "/graph", nil), e.read, false},
		{"runs", false, on("GET", "/runs", nil), e.read, false},
		{"delete", false, on("DELETE", "", nil), e.write, false},
		{"detach and delete", false, on("DELETE", "?cascade=false", nil), e.write, false},
		{"update", false, on("PUT", "", validTimer("x")), e.write, false},
		{"trigger", false, on("POST", "/trigger", nil), e.write, false},
		{"pause", false, on("POST", "/pause", nil), e.write, false},
		{"batch pause", false, batch("pause"), e.write, false},
		{"batch delete", false, batch("delete"), e.write, false},
		{"get by name", true, on("GET", "", nil), e.read, false},
		{"graph by name", true, on("GET", "/graph", nil), e.read, false},
		{"runs by name", true, on("GET", "/runs", nil), e.read, false},
		{"next by name", true, on("GET", "/next", nil), e.read, false},
		{"delete by name", true, on("DELETE", "", nil), e.write, false},
		{"update by name", true, on("PUT", "", validTimer("x")), e.write, false},
		{"enable by name", true, on("POST", "/enable", nil), e.write, false},
		{"disable by name", true, on("POST", "/disable", nil), e.write, false},
		{"trigger by name", true, on("POST", "/trigger", nil), e.write, false},
		{"pause by name", true, on("POST", "/pause", nil), e.write, false},
		{"resume by name", true, on("POST", "/resume", nil), e.write, false},
		{"backfill by name", true, on("POST", "/backfill", map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z"}), e.write, false},
		{"batch pause by name", true, batch("pause"), e.write, false},
		{"batch delete by name", true, batch("delete"), e.write, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hidden, missing := e.hidden.ID, missingID
			if tc.byName {
				hidden, missing = "ops/hidden", "ops/missing"
			}
			if tc.apps {
				hidden, missing = "ops", "nowhere"
			}
			answer := func(ref string) (int, string) {
				req := tc.req(ref)
				req.token = tc.token
				code, _, body := e.send(t, req)
				return code, strings.ReplaceAll(string(body), ref, "REF")
			}
			hc, hb := answer(hidden)
			mc, mb := answer(missing)
			if hc != mc || hb != mb {
				t.Errorf("another app's timer: %d %s\nno such timer:      %d %s", hc, hb, mc, mb)
			}
			if strings.Contains(hb, e.hidden.ID) || strings.Contains(hb, "hidden") {
				t.Errorf("the answer shows the other app's timer: %s", hb)
			}
		})
	}
	// None of this changed the hidden timer.
	var got api.Timer
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers/" + e.hidden.ID, token: rootToken}, 200, &got)
	if got.Paused || got.Name != "hidden" {
		t.Errorf("the hidden timer changed: %+v", got)
	}
}

// TestAppBoundaryDependents: deleting a timer that other apps' timers run
// after names only the token's own dependents (and counts the others),
// and a scoped token may not detach another app's timers.
func TestAppBoundaryDependents(t *testing.T) {
	t.Parallel()
	e := newBoundaryEnv(t)
	up := e.rootTimer(t, "billing", "up", nil)
	mine := e.rootTimer(t, "billing", "down-mine", []string{up.ID})
	theirs := e.rootTimer(t, "ops", "down-theirs", []string{up.ID})
	e.rootTimer(t, "ops", "down-theirs-too", []string{up.ID})

	errorOf := func(req request) (int, api.ErrorBody, string) {
		code, _, raw := e.send(t, req)
		var eb api.ErrorBody
		json.Unmarshal(raw, &eb)
		return code, eb, string(raw)
	}
	code, eb, raw := errorOf(request{method: "DELETE", path: "/api/v1/timers/" + up.ID, token: e.write})
	if code != 409 || eb.Error.Field != "cascade" || !strings.Contains(raw, "billing/down-mine") ||
		!strings.Contains(raw, "2 timers of other apps") || strings.Contains(raw, "theirs") || strings.Contains(raw, theirs.ID) {
		t.Errorf("scoped delete: %d %s; want 409 naming billing/down-mine and counting 2 others", code, raw)
	}
	// The root token sees them all.
	code, _, raw = errorOf(request{method: "DELETE", path: "/api/v1/timers/" + up.ID, token: rootToken})
	if code != 409 || !strings.Contains(raw, "ops/down-theirs") || !strings.Contains(raw, "billing/down-mine") {
		t.Errorf("root delete: %d %s; want 409 naming every dependent", code, raw)
	}
	code, eb, raw = errorOf(request{method: "DELETE", path: "/api/v1/timers/" + up.ID + "?cascade=false", token: e.write})
	if code != 403 || eb.Error.Field != "cascade" || strings.Contains(raw, "theirs") || strings.Contains(raw, theirs.ID) {
		t.Errorf("scoped detach of other apps' timers: %d %s; want 403 on cascade", code, raw)
	}
	var g api.Graph
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers/" + up.ID + "/graph", token: rootToken}, 200, &g)
	if len(g.Downstreams) != 3 {
		t.Fatalf("after the refused detach, %d downstreams, want 3: %+v", len(g.Downstreams), g.Downstreams)
	}
	// The scoped graph shows its own only.
	e.mustSend(t, request{method: "GET", path: "/api/v1/timers/" + up.ID + "/graph", token: e.read}, 200, &g)
	if len(g.Downstreams) != 1 || g.Downstreams[0].Timer.ID != mine.ID {
		t.Errorf("scoped graph downstreams: %+v, want billing/down-mine only", g.Downstreams)
	}
	// A scoped token detaches its own dependents.
	lone := e.rootTimer(t, "billing", "lone", nil)
	e.rootTimer(t, "billing", "lone-down", []string{lone.ID})
	e.mustSend(t, request{method: "DELETE", path: "/api/v1/timers/" + lone.ID + "?cascade=false", token: e.write}, 204, nil)

	// The root token detaches ops' timers: the audit entry of each detach
	// is the detached timer's app's, so billing's readers do not see it.
	e.mustSend(t, request{method: "DELETE", path: "/api/v1/timers/" + up.ID + "?cascade=false", token: rootToken}, 204, nil)
	var audit api.AuditList
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit?limit=1000", token: e.read}, 200, &audit)
	for _, en := range audit.Entries {
		if en.Target == theirs.ID || strings.Contains(en.Detail, "theirs") {
			t.Errorf("billing's audit shows an ops timer: %+v", en)
		}
	}
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit?app=ops&target=" + theirs.ID, token: rootToken}, 200, &audit)
	if len(audit.Entries) != 2 || audit.Entries[0].Action != "timer.detach" {
		t.Errorf("ops' audit of the detached timer: %+v, want its detach and create", audit.Entries)
	}
}

// TestAppBoundaryCycle: a cycle through another app's timer is refused
// without naming it.
func TestAppBoundaryCycle(t *testing.T) {
	t.Parallel()
	e := newBoundaryEnv(t)
	b := e.rootTimer(t, "billing", "b", nil)
	c := e.rootTimer(t, "ops", "c", []string{b.ID})
	a := e.rootTimer(t, "billing", "a", []string{c.ID})
	body := validTimer("b")
	body["after"] = afterList("billing/a")
	for _, tc := range []struct {
		token string
		want  string
	}{
		{e.write, "makes a cycle: billing/b → … → billing/a → billing/b"},
		{rootToken, "makes a cycle: billing/b → ops/c → billing/a → billing/b"},
	} {
		code, _, raw := e.send(t, request{method: "PUT", path: "/api/v1/timers/" + b.ID, body: body, token: tc.token})
		var eb api.ErrorBody
		json.Unmarshal(raw, &eb)
		if code != 400 || eb.Error.Field != "after" || eb.Error.Message != tc.want {
			t.Errorf("cycle: %d %s, want 400 on after: %s", code, raw, tc.want)
		}
		if tc.token == e.write && strings.Contains(string(raw), c.ID) {
			t.Errorf("the scoped answer shows the ops timer's id: %s", raw)
		}
	}
	_ = a
}

// TestReportAppsChecked: generate_report's apps are checked against the
// token at save: a scoped token may report on its own apps only.
func TestReportAppsChecked(t *testing.T) {
	t.Parallel()
	e := newBoundaryEnv(t)
	report := func(apps any) map[string]any {
		body := validTimer(fmt.Sprintf("report%d", seq.Add(1)))
		args := map[string]any{"period": "24h"}
		if apps != nil {
			args["apps"] = apps
		}
		// The built-in's own name: the API's check must follow a rename.
		body["action"] = map[string]any{"type": "handler", "handler": map[string]any{"name": builtin.GenerateReportName, "args": args}}
		return body
	}
	for _, tc := range []struct {
		name  string
		token string
		apps  any
		want  int
	}{
		{"own app by default", "write", nil, 201},
		{"own app", "write", []string{"billing"}, 201},
		{"every app", "write", []string{"*"}, 403},
		{"another app", "write", []string{"billing", "ops"}, 403},
		{"every app, root", "root", []string{"*"}, 201},
		{"apps not a list", "write", "ops", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := e.write
			if tc.token == "root" {
				tok = rootToken
			}
			code, _, raw := e.send(t, request{method: "POST", path: "/api/v1/timers?allow_unknown_handler=true", body: report(tc.apps), token: tok})
			var eb api.ErrorBody
			json.Unmarshal(raw, &eb)
			if code != tc.want || (code >= 400 && eb.Error.Field != "action.handler.args.apps") {
				t.Errorf("status %d %s, want %d (on action.handler.args.apps when refused)", code, raw, tc.want)
			}
		})
	}
	// An update of a report created by an admin over every app cannot
	// keep its apps with a scoped token.
	var tm api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers?allow_unknown_handler=true", body: report([]string{"*"}), token: rootToken}, 201, &tm)
	upd := report([]string{"*"})
	upd["name"] = tm.Name
	upd["description"] = "changed"
	e.mustSend(t, request{method: "PUT", path: "/api/v1/timers/" + tm.ID, body: upd, token: e.write}, 403, nil)
}

// TestHandlerListsScoped: a handler that no live node has is refused;
// the answer lists the nodes' handlers to tokens not scoped to apps only.
func TestHandlerListsScoped(t *testing.T) {
	t.Parallel()
	e := newBoundaryEnv(t, func(c *api.Config) { c.Engine.(*apitest.FakeEngine).Handlers = []string{"ops-payroll-export"} })
	body := func() map[string]any {
		b := validTimer(fmt.Sprintf("h%d", seq.Add(1)))
		b["action"] = map[string]any{"type": "handler", "handler": map[string]any{"name": "nope"}}
		return b
	}
	code, _, raw := e.send(t, request{method: "POST", path: "/api/v1/timers", body: body(), token: e.write})
	if code != 400 || !strings.Contains(string(raw), `no such handler \"nope\"`) || strings.Contains(string(raw), "ops-payroll-export") {
		t.Errorf("scoped: %d %s; want 400 without the nodes' handlers", code, raw)
	}
	code, _, raw = e.send(t, request{method: "POST", path: "/api/v1/timers", body: body(), token: rootToken})
	if code != 400 || !strings.Contains(string(raw), "ops-payroll-export") {
		t.Errorf("root: %d %s; want 400 listing the nodes' handlers", code, raw)
	}
	// The handler a node has is found for a scoped token.
	ok := body()
	ok["action"].(map[string]any)["handler"].(map[string]any)["name"] = "ops-payroll-export"
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: ok, token: e.write}, 201, nil)
}

// TestAuditScopedReaders: a scoped reader sees its apps' entries, with the
// name and address of tokens within its apps only.
func TestAuditScopedReaders(t *testing.T) {
	t.Parallel()
	e := newBoundaryEnv(t)
	admin := e.newToken(t, "ops-admin", model.RoleAdmin).Token
	both := e.newToken(t, "both-apps", model.RoleWrite, "billing", "ops").Token
	for i, tok := range []string{rootToken, admin, both, e.write} {
		body := validTimer(fmt.Sprintf("au%d", i))
		e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: body, token: tok}, 201, nil)
	}
	var list api.AuditList
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit?app=billing", token: e.read}, 200, &list)
	shown := map[string]bool{}
	for _, en := range list.Entries {
		if en.App != "billing" {
			t.Errorf("entry of app %s: %+v", en.App, en)
		}
		if en.TokenName != "" {
			shown[en.TokenName] = true
		}
		if en.TokenName == "" && (en.TokenID != "" || en.Remote != "") {
			t.Errorf("entry %+v: a hidden token's id or address shown", en)
		}
	}
	if len(list.Entries) != 4 || len(shown) != 1 || !shown["billing-deployer"] {
		t.Errorf("scoped audit: %d entries, token names %v; want 4, billing-deployer's only", len(list.Entries), shown)
	}
	e.mustSend(t, request{method: "GET", path: "/api/v1/audit?app=billing", token: rootToken}, 200, &list)
	shown = map[string]bool{}
	for _, en := range list.Entries {
		shown[en.TokenName] = en.Remote != ""
	}
	if len(shown) != 4 || !shown["admin"] || !shown["ops-admin"] {
		t.Errorf("admin audit: token names and addresses %v; want all 4 with addresses", shown)
	}
}

// TestReadyzDetail: /readyz says why it is not ready with a reason code
// to everyone, and with the store's error to admin tokens only.
func TestReadyzDetail(t *testing.T) {
	t.Parallel()
	storeErr := errors.New("ping: dial tcp 10.20.30.40:5432: password authentication failed for user chime")
	for _, tc := range []struct {
		name    string
		err     error
		reason  string
		message string
	}{
		{"store", storeErr, "store_unreachable", "not ready: store unreachable"},
		{"not started", model.ErrNotStarted, "not_started", "not ready: engine not started"},
		{"clock skew", fmt.Errorf("%w: 5s off", model.ErrClockSkew), "clock_skew", "not ready: clock skew"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newBoundaryEnv(t, func(c *api.Config) { c.Engine.(*apitest.FakeEngine).ReadyErr = tc.err })
			admin := e.newToken(t, "ops-admin", model.RoleAdmin).Token
			scopedAdmin := e.newToken(t, "billing-admin", model.RoleAdmin, "billing").Token
			for _, c := range []struct {
				who, token string
				detail     bool
			}{
				{"anonymous", "", false},
				{"invalid token", "chm_nope", false},
				{"scoped read", e.read, false},
				{"scoped admin", scopedAdmin, false},
				{"admin", admin, true},
				{"root", rootToken, true},
			} {
				code, _, raw := e.send(t, request{method: "GET", path: "/readyz", token: c.token})
				var eb api.ErrorBody
				if err := json.Unmarshal(raw, &eb); err != nil {
					t.Fatalf("%s: %s", c.who, raw)
				}
				want := tc.message
				if c.detail {
					want += ": " + tc.err.Error()
				}
				if code != 503 || eb.Error.Reason != tc.reason || eb.Error.Message != want {
					t.Errorf("%s: %d %s; want 503, reason %s, message %q", c.who, code, raw, tc.reason, want)
				}
			}
		})
	}
}
