package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"
	vErrors "github.com/pb33f/libopenapi-validator/errors"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/app/api/apitest"
	"github.com/chimehq/chime/model"
)

// oaCase is one request of TestOpenAPI.
type oaCase struct {
	method, path string
	body         any               // string: sent as is; other: JSON; nil: none
	contentType  string            // default application/json when there is a body
	token        string            // Bearer token; "" sends none
	header       map[string]string // extra headers
	want         int               // the answer's status
	// offSpec says the request breaks the document (a missing required
	// parameter, a value its schema refuses, no token where one is
	// required): request validation must then report it.
	offSpec bool
	// on is the server to send to; nil: the test's main one.
	on *env
}

func (c oaCase) String() string { return fmt.Sprintf("%s %s (want %d)", c.method, c.path, c.want) }

// newRequest makes the HTTP request of c against base.
func (c oaCase) newRequest(t *testing.T, base string) *http.Request {
	t.Helper()
	r := bodyReader(t, c.body)
	req, err := http.NewRequest(c.method, base+c.path, r)
	if err != nil {
		t.Fatal(err)
	}
	if r != nil {
		ct := c.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	return req
}

// specRoute maps a ServeMux pattern to the method and path of its
// operation in the OpenAPI document.
func specRoute(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	switch path {
	case "/{$}":
		path = "/"
	case "/ui/":
		path = "/ui/{file}"
	}
	return method, path
}

// noErrorCase lists the routes that have no error answer to test, and why.
var noErrorCase = map[string]string{
	"GET /healthz": "it answers 200 while the process is up: no input, no token, no Host or Origin check",
}

// formatErrs renders validation errors with their schema failures.
func formatErrs(errs []*vErrors.ValidationError) string {
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintf(&b, "\n  - %s: %s", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			fmt.Fprintf(&b, "\n      %s: %s (%s)", f.FieldPath, f.Reason, f.KeywordLocation)
		}
	}
	return b.String()
}

// TestOpenAPI keeps internal/app/api/openapi.json honest: it must be a valid OpenAPI
// 3.1 document with an operation for every route the server registers
// and no operation without a route, and every route gets at least one
// request that succeeds and one that fails (but GET /healthz), each
// request and answer validated against the document: status, required
// headers and body. A request marked offSpec must be refused by the
// document too. A route added without its operation, or without requests
// here, fails the test.
func TestOpenAPI(t *testing.T) {
	t.Parallel()
	var cfg api.Config
	e := newEnv(t, withAuth, func(c *api.Config) { cfg = *c })
	patterns := api.New(cfg).Patterns()

	// The document is what the server serves, without a token.
	res, err := e.srv.Client().Get(e.srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/openapi.json: %d, %v", res.StatusCode, err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET /api/v1/openapi.json: Content-Type %q, want application/json", ct)
	}
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		t.Fatalf("parse the document: %v", err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1.") {
		t.Fatalf("openapi version %q, want 3.1.x", v)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("build the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		t.Fatalf("the document is not a valid OpenAPI 3.1 document:%s", formatErrs(verrs))
	}

	checkOperations(t, doc, patterns)

	// A mux of the same patterns tells which route a request goes to.
	mux := http.NewServeMux()
	for _, p := range patterns {
		mux.Handle(p, http.NotFoundHandler())
	}

	cases := openAPICases(t, e)
	tested := map[string][2]bool{} // pattern: [success seen, error seen]
	for _, c := range cases {
		on := e
		if c.on != nil {
			on = c.on
		}
		req := c.newRequest(t, on.srv.URL)
		_, pattern := mux.Handler(req)
		if pattern == "" {
			t.Errorf("%s: matches no route", c)
			continue
		}
		seen := tested[pattern]
		if c.want < 400 {
			seen[0] = true
		} else {
			seen[1] = true
		}
		tested[pattern] = seen

		ok, verrs := v.ValidateHttpRequest(c.newRequest(t, on.srv.URL))
		switch {
		case c.offSpec && ok:
			t.Errorf("%s: the document accepts this request, which breaks it", c)
		case !c.offSpec && !ok:
			t.Errorf("%s: the request does not follow the document:%s", c, formatErrs(verrs))
		}

		res, err := on.srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("%s: read the answer: %v", c, err)
		}
		if res.StatusCode != c.want {
			t.Errorf("%s: status %d; body %s", c, res.StatusCode, b)
			continue
		}
		res.Body = io.NopCloser(bytes.NewReader(b))
		if ok, verrs := v.ValidateHttpResponse(c.newRequest(t, on.srv.URL), res); !ok {
			t.Errorf("%s: the answer does not follow the document:%s\nbody %s", c, formatErrs(verrs), b)
		}
	}

	for _, p := range patterns {
		seen := tested[p]
		if !seen[0] {
			t.Errorf("route %s: no request that succeeds in TestOpenAPI", p)
		}
		if _, exempt := noErrorCase[p]; !seen[1] && !exempt {
			t.Errorf("route %s: no request that fails in TestOpenAPI", p)
		}
	}
}

// checkOperations checks that the document has an operation for every
// route and no operation without a route.
func checkOperations(t *testing.T, doc libopenapi.Document, patterns []string) {
	t.Helper()
	model, err := doc.BuildV3Model()
	if err != nil {
		t.Fatalf("build the document's model: %v", err)
	}
	documented := map[string]bool{}
	for path, item := range model.Model.Paths.PathItems.FromOldest() {
		for method := range item.GetOperations().FromOldest() {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	routes := map[string]bool{}
	for _, p := range patterns {
		method, path := specRoute(p)
		routes[method+" "+path] = true
		if !documented[method+" "+path] {
			t.Errorf("route %s: no operation %s %s in internal/app/api/openapi.json", p, method, path)
		}
	}
	var extra []string
	for op := range documented {
		if !routes[op] {
			extra = append(extra, op)
		}
	}
	sort.Strings(extra)
	for _, op := range extra {
		t.Errorf("operation %s of internal/app/api/openapi.json: no such route", op)
	}
}

// openAPICases makes the fixtures of TestOpenAPI in e and returns its
// requests.
func openAPICases(t *testing.T, e *env) []oaCase {
	t.Helper()
	root := rootToken
	read := e.newToken(t, "oa-read", model.RoleRead).Token
	scoped := e.newToken(t, "oa-scoped", model.RoleWrite, "billing").Token
	victim := e.newToken(t, "oa-victim", model.RoleRead)

	var tm, doomed api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", token: root, body: validTimer("oa-main")}, 201, &tm)
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", token: root, body: validTimer("oa-doomed")}, 201, &doomed)
	var run api.Run
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers/" + tm.ID + "/trigger", token: root}, 201, &run)
	var rerun api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", token: root, body: validTimer("oa-rerun")}, 201, &rerun)
	ended := e.endedRun(t, rerun.ID)
	// Dependencies: oa-down runs after oa-up.
	var up, down api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", token: root, body: validTimer("oa-up")}, 201, &up)
	downBody := validTimer("oa-down")
	delete(downBody, "schedule")
	downBody["after"] = []map[string]any{{"timer": up.ID, "on": "success"}}
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", token: root, body: downBody}, 201, &down)
	afterByName := validTimer("oa-after-name")
	afterByName["schedule"] = ""
	afterByName["after"] = []map[string]any{{"timer": "billing/oa-up", "on": "finish"}}
	cycle := validTimer("oa-up")
	cycle["after"] = []map[string]any{{"timer": down.ID, "on": "failure"}}

	// The UI page's ETag, for a conditional request.
	_, h, _ := e.send(t, request{method: "GET", path: "/"})
	etag := h.Get("ETag")

	timerPath := "/api/v1/timers/" + tm.ID
	edited := validTimer("oa-main")
	edited["description"] = "edited"
	edited["retry"] = map[string]any{"max_attempts": 3, "backoff": "2s", "max_backoff": "1m"}
	edited["policy"] = map[string]any{"misfire": "latest", "overlap": "skip", "catchup_window": "1m",
		"start_at": "2026-01-01T00:00:00Z", "max_fires": 10}
	edited["enabled"] = true
	edited["timeout"] = "10s"
	edited["id"] = tm.ID
	edited["next_fire_times"] = tm.NextFireTimes
	edited["created_at"] = tm.CreatedAt
	mismatched := validTimer("oa-main")
	mismatched["id"] = "01JNX8Q4Z3M0K9W6V5T2R1P0NB"
	bigHeader := map[string]string{}
	for i := range 100 {
		bigHeader[fmt.Sprintf("X-Pad-%d", i)] = strings.Repeat("x", 40)
	}
	big := validTimer("oa-big")
	big["action"] = map[string]any{"type": "http", "http": map[string]any{"url": "https://example.com/hook", "header": bigHeader}}
	handlerTimer := validTimer("oa-handler")
	handlerTimer["action"] = map[string]any{"type": "handler", "handler": map[string]any{"name": "cleanup", "args": map[string]any{"days": 30}}}
	historyTimer := validTimer("oa-history")
	historyTimer["history"] = map[string]any{"keep": 100, "max_age": "168h"}
	unknownField := validTimer("oa-unknown")
	unknownField["colour"] = "blue"
	backfill := map[string]any{"from": "2026-02-27T00:00:00Z", "to": "2026-02-28T23:00:00Z"}
	evil := map[string]string{"Origin": "https://evil.example"}

	cases := []oaCase{
		{method: "POST", path: "/api/v1/timers", body: validTimer("oa-new"), token: root, want: 201},
		{method: "POST", path: "/api/v1/timers", body: handlerTimer, token: root, want: 201},
		{method: "POST", path: "/api/v1/timers", body: historyTimer, token: root, want: 201},
		{method: "POST", path: "/api/v1/timers", body: with("history", map[string]any{"keep": -1}), token: root, want: 400, offSpec: true},
		{method: "POST", path: "/api/v1/timers", body: with("history", map[string]any{"max_age": "a month"}), token: root, want: 400},
		{method: "POST", path: "/api/v1/timers", body: with("schedule", "0 24 * * *"), token: root, want: 400},
		{method: "POST", path: "/api/v1/timers", body: with("name", "oa-jitter", "policy", map[string]any{"jitter": "30s", "dst": "shift"}), token: root, want: 201},
		{method: "POST", path: "/api/v1/timers", body: with("policy", map[string]any{"jitter": "48h"}), token: root, want: 400},
		{method: "POST", path: "/api/v1/timers", body: with("policy", map[string]any{"dst": "twice"}), token: root, want: 400, offSpec: true},
		{method: "POST", path: "/api/v1/timers", body: `{"app": "billing",`, token: root, want: 400, offSpec: true},
		{method: "POST", path: "/api/v1/timers", body: unknownField, token: root, want: 400, offSpec: true},
		{method: "POST", path: "/api/v1/timers", body: with("action", map[string]any{"type": "http"}), token: root, want: 400, offSpec: true},
		{method: "POST", path: "/api/v1/timers", body: validTimer("oa-main"), token: root, want: 409},
		{method: "POST", path: "/api/v1/timers", body: big, token: root, want: 413},
		{method: "POST", path: "/api/v1/timers", body: `app=billing`, contentType: "application/x-www-form-urlencoded", token: root, want: 415, offSpec: true},
		{method: "POST", path: "/api/v1/timers", body: validTimer("oa-anon"), want: 401, offSpec: true},
		{method: "POST", path: "/api/v1/timers", body: validTimer("oa-read"), token: read, want: 403},

		{method: "GET", path: "/api/v1/timers?app=billing&enabled=true&limit=1", token: root, want: 200},
		{method: "GET", path: "/api/v1/timers", token: scoped, want: 200},
		{method: "GET", path: "/api/v1/timers?limit=0", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/timers?enabled=maybe", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/timers?cursor=bm90LWEtY3Vyc29y", token: root, want: 400},
		{method: "GET", path: "/api/v1/timers", token: "chm_not-a-token", want: 401},
		{method: "GET", path: "/api/v1/timers?state=failing", token: root, want: 200},
		{method: "GET", path: "/api/v1/timers:counts?app=billing&search=a", token: scoped, want: 200},
		{method: "GET", path: "/api/v1/timers:counts?search=" + strings.Repeat("x", 256), token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/timers:counts", token: "chm_not-a-token", want: 401},

		{method: "GET", path: timerPath, token: read, want: 200},
		{method: "GET", path: "/api/v1/timers/nope", token: root, want: 404},
		{method: "PUT", path: timerPath, body: edited, token: root, want: 200},
		{method: "PUT", path: timerPath, body: mismatched, token: root, want: 400},
		{method: "PUT", path: timerPath, body: with("timeout", "forever"), token: root, want: 400},
		{method: "PUT", path: "/api/v1/timers/nope", body: validTimer("oa-main"), token: root, want: 404},
		{method: "DELETE", path: "/api/v1/timers/" + doomed.ID, token: root, want: 204},
		{method: "DELETE", path: "/api/v1/timers/" + doomed.ID, token: root, want: 404},
		{method: "DELETE", path: timerPath, token: read, want: 403},

		{method: "POST", path: "/api/v1/timers", body: afterByName, token: root, want: 201},
		{method: "POST", path: "/api/v1/timers", body: with("after", []map[string]any{{"timer": up.ID, "on": "sometimes"}}), token: root, want: 400, offSpec: true},
		{method: "PUT", path: "/api/v1/timers/" + up.ID, body: cycle, token: root, want: 400},
		{method: "GET", path: "/api/v1/timers/" + up.ID + "/graph", token: read, want: 200},
		{method: "GET", path: "/api/v1/timers/" + down.ID + "/graph", token: root, want: 200},
		{method: "GET", path: "/api/v1/timers/nope/graph", token: root, want: 404},
		{method: "GET", path: "/api/v1/timers/" + up.ID + "/next?n=3", token: read, want: 200},
		{method: "GET", path: "/api/v1/timers/" + up.ID + "/next?n=0", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/timers/nope/next", token: root, want: 404},
		{method: "DELETE", path: "/api/v1/timers/" + up.ID, token: root, want: 409},
		{method: "DELETE", path: "/api/v1/timers/" + up.ID + "?cascade=true", token: root, want: 400, offSpec: true},
		{method: "DELETE", path: "/api/v1/timers/" + up.ID + "?cascade=false", token: root, want: 204},
	}
	for _, verb := range []string{"disable", "enable", "pause", "resume"} {
		cases = append(cases,
			oaCase{method: "POST", path: timerPath + "/" + verb, token: root, want: 200},
			oaCase{method: "POST", path: "/api/v1/timers/nope/" + verb, token: root, want: 404})
	}
	cases = append(cases, []oaCase{
		{method: "POST", path: timerPath + "/trigger", token: root, want: 201},
		{method: "POST", path: "/api/v1/timers/nope/trigger", token: root, want: 404},
		{method: "POST", path: timerPath + "/backfill", body: backfill, token: root, want: 201},
		{method: "POST", path: timerPath + "/backfill", body: map[string]any{"from": "2026-02-27T00:00:00Z", "to": "2027-01-01T00:00:00Z"}, token: root, want: 400},
		{method: "POST", path: timerPath + "/backfill", body: map[string]any{"to": "2026-02-28T23:00:00Z"}, token: root, want: 400, offSpec: true},
		{method: "POST", path: "/api/v1/timers/nope/backfill", body: backfill, token: root, want: 404},

		{method: "GET", path: timerPath + "/runs?status=pending&limit=5", token: root, want: 200},
		{method: "GET", path: timerPath + "/runs?status=bogus", token: root, want: 400, offSpec: true},
		{method: "GET", path: timerPath + "/runs?before=2026-03-01T10:30:00Z&limit=1", token: root, want: 200},
		{method: "GET", path: timerPath + "/runs?before=yesterday", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/timers/nope/runs", token: root, want: 404},
		{method: "GET", path: timerPath + "/runs?view=history&limit=5", token: read, want: 200},
		{method: "GET", path: timerPath + "/runs?view=upcoming", token: read, want: 200},
		{method: "GET", path: timerPath + "/runs?view=later", token: read, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/runs?app=billing&status=pending&from=2026-01-01T00:00:00Z&limit=5", token: scoped, want: 200},
		{method: "GET", path: "/api/v1/runs?timer=" + url.QueryEscape(tm.App+"/"+tm.Name), token: read, want: 200},
		{method: "GET", path: "/api/v1/runs?status=bogus", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/runs?from=yesterday", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/runs?timer=nope", token: root, want: 404},
		{method: "GET", path: "/api/v1/runs/counts?app=billing&from=2026-01-01T00:00:00Z", token: scoped, want: 200},
		{method: "GET", path: "/api/v1/runs/counts?to=soon", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/runs/" + run.ID, token: read, want: 200},
		{method: "GET", path: "/api/v1/runs/nope", token: root, want: 404},
		{method: "GET", path: "/api/v1/runs/" + ended, token: read, want: 200},
		{method: "POST", path: "/api/v1/runs/" + ended + "/rerun", token: root, want: 201},
		{method: "POST", path: "/api/v1/runs/" + run.ID + "/rerun", token: root, want: 409},
		{method: "POST", path: "/api/v1/runs/" + ended + "/rerun", token: read, want: 403},
		{method: "POST", path: "/api/v1/runs/nope/rerun", token: root, want: 404},

		{method: "GET", path: "/api/v1/schedule/next?spec=0+9+*+*+MON-FRI&tz=America/New_York&n=2&from=2026-03-01T00:00:00Z", token: read, want: 200},
		{method: "GET", path: "/api/v1/schedule/next?spec=30+2+*+*+*&tz=America/New_York&dst=skip_gap&from=2026-03-07T12:00:00Z", token: read, want: 200},
		{method: "GET", path: "/api/v1/schedule/next?spec=@daily&dst=twice", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/schedule/next?tz=UTC", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/schedule/next?spec=0+24+*+*+*", token: root, want: 400},
		{method: "GET", path: "/api/v1/schedule/next?spec=@hourly&tz=Mars/Olympus", token: root, want: 400},
		{method: "GET", path: "/api/v1/schedule/next?spec=@hourly&n=5000", token: root, want: 400, offSpec: true},

		{method: "GET", path: "/api/v1/stats", token: read, want: 200},
		{method: "GET", path: "/api/v1/stats", token: scoped, want: 403},
		{method: "GET", path: "/api/v1/stats/series", token: read, want: 200},
		{method: "GET", path: "/api/v1/stats/series", token: scoped, want: 403},
		{method: "GET", path: "/api/v1/action-types", token: read, want: 200},
		{method: "GET", path: "/api/v1/action-types", want: 401, offSpec: true},
		{method: "GET", path: "/api/v1/timers?search=t&enabled=true", token: read, want: 200},
		{method: "GET", path: "/api/v1/timers?search=" + strings.Repeat("x", 256), token: read, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/nodes", token: root, want: 200},
		{method: "GET", path: "/api/v1/nodes", want: 401, offSpec: true},

		{method: "POST", path: "/api/v1/tokens", body: api.TokenRequest{Name: "oa-new", Role: "write", Apps: []string{"billing"}}, token: root, want: 201},
		{method: "POST", path: "/api/v1/tokens", body: map[string]any{"name": "oa-x", "role": "root"}, token: root, want: 400, offSpec: true},
		{method: "POST", path: "/api/v1/tokens", body: map[string]any{"name": "a<b", "role": "read"}, token: root, want: 400},
		{method: "POST", path: "/api/v1/tokens", body: map[string]any{"name": "oa-y", "role": "read"}, token: scoped, want: 403},
		{method: "GET", path: "/api/v1/tokens", token: root, want: 200},
		{method: "GET", path: "/api/v1/tokens", token: read, want: 403},
		{method: "DELETE", path: "/api/v1/tokens/" + victim.ID, token: root, want: 204},
		{method: "DELETE", path: "/api/v1/tokens/" + victim.ID, token: root, want: 404},

		{method: "GET", path: "/api/v1/audit?app=billing&target=" + tm.ID + "&limit=10", token: root, want: 200},
		{method: "GET", path: "/api/v1/audit", token: scoped, want: 200},
		{method: "GET", path: "/api/v1/audit?limit=abc", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/audit?cursor=bm90LWEtY3Vyc29y", token: root, want: 400},
		{method: "GET", path: "/api/v1/audit", token: read, want: 403},

		{method: "GET", path: "/api/v1/apps/billing/signing-secret", token: scoped, want: 200},
		{method: "GET", path: "/api/v1/apps/bad%20app/signing-secret", token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/apps/ops/signing-secret", token: scoped, want: 403},
		{method: "POST", path: "/api/v1/apps/billing/signing-secret/rotate", body: map[string]any{"overlap": "1h"}, token: root, want: 201},
		{method: "POST", path: "/api/v1/apps/billing/signing-secret/rotate", token: root, want: 201},
		{method: "POST", path: "/api/v1/apps/billing/signing-secret/rotate", body: map[string]any{"overlap": "forever"}, token: root, want: 400},
		{method: "POST", path: "/api/v1/apps/billing/signing-secret/rotate", body: map[string]any{"window": "1h"}, token: root, want: 400, offSpec: true},
		{method: "POST", path: "/api/v1/apps/billing/signing-secret/rotate", token: read, want: 403},
		{method: "POST", path: "/api/v1/apps/billing/pause", token: scoped, want: 200},
		{method: "POST", path: "/api/v1/apps/billing/resume", token: root, want: 200},
		{method: "POST", path: "/api/v1/apps/ops/pause", token: scoped, want: 403},
		{method: "POST", path: "/api/v1/apps/ops/resume", token: read, want: 403},
		{method: "POST", path: "/api/v1/timers:batch", body: map[string]any{"action": "pause", "ids": []string{tm.ID, "nope"}}, token: root, want: 200},
		{method: "POST", path: "/api/v1/timers:batch", body: map[string]any{"action": "resume", "filter": map[string]any{"app": "billing", "enabled": true}}, token: root, want: 200},
		{method: "POST", path: "/api/v1/timers:batch", body: map[string]any{"action": "explode", "ids": []string{tm.ID}}, token: root, want: 400, offSpec: true},
		{method: "POST", path: "/api/v1/timers:batch", body: map[string]any{"action": "pause"}, token: root, want: 400},
		{method: "POST", path: "/api/v1/timers:batch", body: map[string]any{"action": "pause", "ids": []string{tm.ID}}, token: read, want: 403},
		{method: "PUT", path: "/api/v1/apps/billing/notify", body: map[string]any{"notify": []map[string]any{{"on": "failure",
			"webhook": map[string]any{"url": "https://hooks.example.com/chime"}}}}, token: scoped, want: 200},
		{method: "PUT", path: "/api/v1/apps/billing/notify", body: map[string]any{"notify": []map[string]any{{"on": "never",
			"webhook": map[string]any{"url": "https://hooks.example.com/chime"}}}}, token: root, want: 400, offSpec: true},
		{method: "GET", path: "/api/v1/apps/billing/notify", token: scoped, want: 200},
		{method: "GET", path: "/api/v1/apps/ops/notify", token: scoped, want: 403},
		{method: "PUT", path: "/api/v1/apps/billing/secrets/API_KEY", body: map[string]any{"value": "s3cret", "hosts": []string{"api.example.com"}},
			token: scoped, want: 200},
		{method: "PUT", path: "/api/v1/apps/billing/secrets/GONE", body: map[string]any{"value": "s3cret", "commands": []string{"/usr/bin/sync"}},
			token: root, want: 200},
		{method: "PUT", path: "/api/v1/apps/billing/secrets/API_KEY", body: map[string]any{"value": "s3cret"}, token: root, want: 400},
		{method: "PUT", path: "/api/v1/apps/billing/secrets/API_KEY", body: map[string]any{"hosts": []string{"a.test"}}, token: root, want: 400, offSpec: true},
		{method: "PUT", path: "/api/v1/apps/ops/secrets/API_KEY", body: map[string]any{"value": "s3cret", "hosts": []string{"a.test"}}, token: scoped, want: 403},
		{method: "GET", path: "/api/v1/apps/billing/secrets", token: scoped, want: 200},
		{method: "GET", path: "/api/v1/apps/billing/secrets", token: read, want: 403},
		{method: "DELETE", path: "/api/v1/apps/billing/secrets/GONE", token: root, want: 204},
		{method: "DELETE", path: "/api/v1/apps/billing/secrets/GONE", token: root, want: 404},
		{method: "DELETE", path: "/api/v1/apps/billing/secrets/API_KEY", token: read, want: 403},

		{method: "GET", path: "/api/v1/openapi.json", want: 200},
		{method: "GET", path: "/api/v1/openapi.json", header: evil, want: 403},
		{method: "GET", path: "/healthz", want: 200},
		{method: "GET", path: "/readyz", want: 200},
		{method: "GET", path: "/metrics", token: root, want: 200},
		{method: "GET", path: "/metrics", want: 401, offSpec: true},
		{method: "GET", path: "/metrics", token: scoped, want: 403},
		{method: "GET", path: "/", want: 200},
		{method: "GET", path: "/", header: map[string]string{"If-None-Match": etag}, want: 304},
		{method: "GET", path: "/", header: evil, want: 403},
		{method: "GET", path: "/timers", want: 200},
		{method: "GET", path: "/timers", header: evil, want: 403},
		{method: "GET", path: "/timers/new", want: 200},
		{method: "GET", path: "/timers/new", header: evil, want: 403},
		{method: "GET", path: "/timers/01ABC", want: 200},
		{method: "GET", path: "/timers/01ABC", header: evil, want: 403},
		{method: "GET", path: "/timers/01ABC/edit", want: 200},
		{method: "GET", path: "/timers/01ABC/edit", header: evil, want: 403},
		{method: "GET", path: "/runs", want: 200},
		{method: "GET", path: "/runs", header: evil, want: 403},
		{method: "GET", path: "/runs/01ABC", want: 200},
		{method: "GET", path: "/runs/01ABC", header: evil, want: 403},
		{method: "GET", path: "/nodes", want: 200},
		{method: "GET", path: "/nodes", header: evil, want: 403},
		{method: "GET", path: "/ui/app.js", want: 200},
		{method: "GET", path: "/ui/app.css", want: 200},
		{method: "GET", path: "/ui/nope.js", want: 404},
	}...)
	// A node that is not ready: a 503 of /readyz.
	unready := newEnv(t, withAuth, func(c *api.Config) {
		c.Engine.(*apitest.FakeEngine).ReadyErr = errors.New("store unreachable")
	})
	cases = append(cases, oaCase{method: "GET", path: "/readyz", want: 503, on: unready})
	// A server that serves another Host: 421.
	elsewhere := newEnv(t, withAuth, func(c *api.Config) { c.AllowedHosts = []string{"chime.example:8080"} })
	cases = append(cases,
		oaCase{method: "GET", path: "/api/v1/timers", token: root, want: 421, on: elsewhere},
		oaCase{method: "GET", path: "/api/v1/openapi.json", want: 421, on: elsewhere},
		oaCase{method: "GET", path: "/healthz", want: 200, on: elsewhere})
	return slices.Clip(cases)
}

// TestOpenAPISchemaFields checks that the document's schemas have a
// property for every JSON field of the Go types of the API, so that a
// field added to a type (an optional one no test request shows) is
// documented too.
func TestOpenAPISchemaFields(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		schema string
		v      any
	}{
		{"Timer", api.Timer{}}, {"TimerRequest", api.Timer{}},
		{"Action", api.Action{}}, {"HTTPAction", api.HTTPAction{}},
		{"HandlerAction", api.HandlerAction{}}, {"ShellAction", api.ShellAction{}},
		{"Retry", api.Retry{}}, {"Policy", api.Policy{}}, {"History", api.History{}},
		{"Run", api.Run{}}, {"SentRequest", model.SentRequest{}}, {"TimerList", api.TimerList{}}, {"TimerCounts", api.TimerCounts{}}, {"RunList", api.RunList{}},
		{"BackfillRequest", api.BackfillRequest{}}, {"BackfillResponse", api.BackfillResponse{}},
		{"ScheduleTimes", api.ScheduleTimes{}}, {"Stats", api.Stats{}},
		{"StatsSeries", api.StatsSeries{}}, {"SeriesPoint", api.SeriesPoint{}}, {"TimerNote", api.TimerNote{}},
		{"ActionTypes", api.ActionTypes{}},
		{"Node", api.Node{}}, {"NodeList", api.NodeList{}},
		{"TokenRequest", api.TokenRequest{}}, {"Token", api.Token{}}, {"TokenList", api.TokenList{}},
		{"AuditEntry", model.AuditEntry{}}, {"AuditList", api.AuditList{}},
		{"SigningSecret", api.SigningSecret{}}, {"SigningSecretVersion", api.SigningSecretVersion{}},
		{"RotateRequest", api.RotateRequest{}}, {"Error", api.ErrorBody{}},
	} {
		sc, ok := doc.Components.Schemas[tc.schema]
		if !ok {
			t.Errorf("no schema %s", tc.schema)
			continue
		}
		typ := reflect.TypeOf(tc.v)
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, ok := sc.Properties[name]; !ok {
				t.Errorf("schema %s: no property %q (field %s.%s)", tc.schema, name, typ, f.Name)
			}
		}
	}
}
