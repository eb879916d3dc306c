package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/app/api/apitest"
	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/metrics"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// testNow is the fixed clock of the tests.
var testNow = time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)

type env struct {
	srv    *httptest.Server
	engine *apitest.FakeEngine
	store  store.Store
}

func newEnv(t *testing.T, mod ...func(*api.Config)) *env {
	t.Helper()
	st := newStore(t)
	eng := &apitest.FakeEngine{Store: st, Now: func() time.Time { return testNow }}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "chime_test_total", Help: "test"}))
	cfg := api.Config{
		Store:         st,
		Engine:        eng,
		Gatherer:      reg,
		Logger:        discardLogger(),
		HandlerExists: func(name string) bool { return name == "cleanup" },
		Clock:         clock.Func(func() time.Time { return testNow }),
		MaxBodyBytes:  4096,
	}
	for _, m := range mod {
		m(&cfg)
	}
	srv := httptest.NewServer(api.New(cfg).Handler())
	t.Cleanup(srv.Close)
	return &env{srv: srv, engine: eng, store: st}
}

// bodyReader returns a request body: nil for none, a string as it is,
// another value encoded as JSON.
func bodyReader(t *testing.T, body any) io.Reader {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	return r
}

// do sends a request and returns the status and body; body may be a
// string (sent as is) or a value (encoded as JSON).
func (e *env) do(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	r := bodyReader(t, body)
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if r != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// doJSON is do that expects status want and decodes the answer into out.
func (e *env) doJSON(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	code, b := e.do(t, method, path, body)
	if code != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, code, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

func (e *env) createTimer(t *testing.T, body map[string]any) *api.Timer {
	t.Helper()
	var out api.Timer
	e.doJSON(t, "POST", "/api/v1/timers", body, http.StatusCreated, &out)
	return &out
}

func validTimer(name string) map[string]any {
	return map[string]any{
		"app":      "billing",
		"name":     name,
		"schedule": "30 12 * * *",
		"timezone": "America/New_York",
		"action":   map[string]any{"type": "http", "http": map[string]any{"method": "post", "url": "https://example.com/hook"}},
	}
}

// with returns a copy of validTimer("t1") with key set to v (nil deletes).
func with(kv ...any) map[string]any {
	m := validTimer("t1")
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == nil {
			delete(m, k)
		} else {
			m[k] = kv[i+1]
		}
	}
	return m
}

func httpAction(method, url string) map[string]any {
	return map[string]any{"type": "http", "http": map[string]any{"method": method, "url": url}}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	existing := e.createTimer(t, validTimer("existing"))
	tm := "/api/v1/timers"
	big := `{"app":"a","name":"b","description":"` + strings.Repeat("x", 5000) + `"}`

	tests := []struct {
		name      string
		method    string
		path      string
		body      any
		wantCode  int
		wantField string
		wantMsg   string // substring
	}{
		{"bad json", "POST", tm, `{"app":`, 400, "", "invalid JSON"},
		{"syntax error", "POST", tm, `{"app" "x"}`, 400, "", "invalid JSON"},
		{"empty body", "POST", tm, ``, 400, "", "empty"},
		{"not an object", "POST", tm, `[1,2]`, 400, "", "JSON object"},
		{"trailing data", "POST", tm, `{"app":"a"} {}`, 400, "", "after the object"},
		{"unknown field", "POST", tm, with("colour", "red"), 400, "colour", "unknown field"},
		{"bad misfire", "POST", tm, with("policy", map[string]any{"misfire": "never"}), 400, "policy.misfire", "all, latest or skip"},
		{"bad jitter", "POST", tm, with("policy", map[string]any{"jitter": "soon"}), 400, "policy.jitter", "not a Go duration"},
		{"negative jitter", "POST", tm, with("policy", map[string]any{"jitter": "-1s"}), 400, "policy.jitter", "must not be negative"},
		{"jitter over the interval", "POST", tm, with("policy", map[string]any{"jitter": "24h"}), 400, "policy.jitter",
			"shorter than the schedule's shortest interval between fires (24h0m0s)"},
		{"bad dst", "POST", tm, with("policy", map[string]any{"dst": "twice"}), 400, "policy.dst", "default, shift, skip_gap, both, wall"},
		{"bad overlap", "POST", tm, with("policy", map[string]any{"overlap": "queue"}), 400, "policy.overlap", "buffer_one"},
		{"bad catchup", "POST", tm, with("policy", map[string]any{"catchup_window": "soon"}), 400, "policy.catchup_window", "Go duration"},
		{"tiny catchup", "POST", tm, with("policy", map[string]any{"catchup_window": "10ms"}), 400, "policy.catchup_window", "at least 1s"},
		{"end before start", "POST", tm, with("policy", map[string]any{"start_at": "2027-01-02T00:00:00Z", "end_at": "2027-01-01T00:00:00Z"}), 400, "policy.end_at", "before"},
		{"negative max fires", "POST", tm, with("policy", map[string]any{"max_fires": -1}), 400, "policy.max_fires", "negative"},
		{"negative keep", "POST", tm, with("history", map[string]any{"keep": -1}), 400, "history.keep", "must be ≥ 0"},
		{"bad max age", "POST", tm, with("history", map[string]any{"max_age": "a month"}), 400, "history.max_age", "Go duration"},
		{"negative max age", "POST", tm, with("history", map[string]any{"max_age": "-1h"}), 400, "history.max_age", "must be ≥ 0"},
		{"unknown history field", "POST", tm, with("history", map[string]any{"count": 3}), 400, "history.count", "unknown field \"history.count\""},
		{"unknown nested field", "POST", tm, with("action", map[string]any{"type": "http", "http": map[string]any{"method": "GET", "uri": "http://x/"}}), 400, "action.http.uri", "unknown field \"action.http.uri\""},
		{"unknown field in a list", "POST", tm, with("after", []any{map[string]any{"timer": "a/b", "when": "success"}}), 400, "after[0].when", "unknown field"},
		{"backfill without from", "POST", tm + "/" + existing.ID + "/backfill", map[string]any{"to": "2026-01-01T00:00:00Z"}, 400, "from", "required"},
		{"backfill to before from", "POST", tm + "/" + existing.ID + "/backfill", map[string]any{"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, 400, "to", "before from"},
		{"backfill in the future", "POST", tm + "/" + existing.ID + "/backfill", map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2099-01-01T00:00:00Z"}, 400, "to", "future"},
		{"backfill too many", "POST", tm + "/" + existing.ID + "/backfill", map[string]any{"from": "2022-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, 400, "to", "more than 1000"},
		{"backfill unknown timer", "POST", tm + "/nope/backfill", map[string]any{"from": "2025-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"}, 404, "", ""},
		{"wrong type name", "POST", tm, with("name", 42), 400, "name", "must be a string"},
		{"wrong type enabled", "POST", tm, with("enabled", "yes"), 400, "enabled", "boolean"},
		{"timeout as number", "POST", tm, with("timeout", 30), 400, "timeout", "Go duration"},
		{"oversized body", "POST", tm, big, 413, "", "larger than 4096 bytes"},
		{"missing app", "POST", tm, with("app", nil), 400, "app", "is required"},
		{"missing name", "POST", tm, with("name", nil), 400, "name", "is required"},
		{"bad name charset", "POST", tm, with("name", "no spaces"), 400, "name", "letters, digits"},
		{"name too long", "POST", tm, with("name", strings.Repeat("n", 101)), 400, "name", ""},
		{"missing schedule", "POST", tm, with("schedule", nil), 400, "schedule", "is required"},
		{"bad schedule", "POST", tm, with("schedule", "0 24 * * *"), 400, "schedule", "hour: 24 is out of range 0-23"},
		{"schedule too long", "POST", tm, with("schedule", "@every 1m"+strings.Repeat(" ", 600)), 400, "schedule", "longer than 512"},
		{"unknown zone", "POST", tm, with("timezone", "Mars/Olympus"), 400, "timezone", "unknown time zone"},
		{"local zone", "POST", tm, with("timezone", "Local"), 400, "timezone", "unknown time zone"},
		{"missing action", "POST", tm, with("action", nil), 400, "action.type", "is required"},
		{"unknown action type", "POST", tm, with("action", map[string]any{"type": "email"}), 400, "action.type", "not one of"},
		{"http without sub-object", "POST", tm, with("action", map[string]any{"type": "http"}), 400, "action.http", "is required"},
		{"two sub-objects", "POST", tm, with("action", map[string]any{"type": "http",
			"http": map[string]any{"url": "http://x.test"}, "handler": map[string]any{"name": "cleanup"}}), 400, "action.handler", "must not be set"},
		{"bad method", "POST", tm, with("action", httpAction("TRACE", "http://x.test")), 400, "action.http.method", "not one of"},
		{"relative url", "POST", tm, with("action", httpAction("GET", "/hook")), 400, "action.http.url", "absolute"},
		{"ftp url", "POST", tm, with("action", httpAction("GET", "ftp://x.test/")), 400, "action.http.url", "http or https"},
		{"url without host", "POST", tm, with("action", httpAction("GET", "http:///path")), 400, "action.http.url", "no host"},
		{"missing url", "POST", tm, with("action", httpAction("GET", "")), 400, "action.http.url", "is required"},
		{"bad header", "POST", tm, with("action", map[string]any{"type": "http", "http": map[string]any{
			"url": "http://x.test", "header": map[string]any{"Bad Header": "v"}}}), 400, "action.http.header", "not a valid header name"},
		{"shell disabled", "POST", tm, with("action", map[string]any{"type": "shell", "shell": map[string]any{"command": "true"}}), 400, "action.type", "--allow-shell"},
		{"unknown handler", "POST", tm, with("action", map[string]any{"type": "handler", "handler": map[string]any{"name": "nope"}}), 400, "action.handler.name", "no such handler"},
		{"unknown handler, allow flag not a boolean", "POST", tm + "?allow_unknown_handler=maybe", with("action", map[string]any{"type": "handler", "handler": map[string]any{"name": "nope"}}), 400, "allow_unknown_handler", "not true or false"},
		{"bad mode", "POST", tm, with("mode", "everywhere"), 400, "mode", "single or broadcast"},
		{"negative shards", "POST", tm, with("shards", -1), 400, "shards", "between 0 and 1000"},
		{"too many shards", "POST", tm, with("shards", 1001), 400, "shards", "between 0 and 1000"},
		{"shards with broadcast", "POST", tm, with("mode", "broadcast", "shards", 3), 400, "shards", "not be set with mode broadcast"},
		{"bad timeout", "POST", tm, with("timeout", "soon"), 400, "timeout", "not a Go duration"},
		{"zero timeout", "POST", tm, with("timeout", "0s"), 400, "timeout", "positive"},
		{"timeout too long", "POST", tm, with("timeout", "25h"), 400, "timeout", "at most"},
		{"zero attempts", "POST", tm, with("retry", map[string]any{"max_attempts": 0}), 400, "retry.max_attempts", "between 1 and 100"},
		{"too many attempts", "POST", tm, with("retry", map[string]any{"max_attempts": 101}), 400, "retry.max_attempts", "between 1 and 100"},
		{"negative backoff", "POST", tm, with("retry", map[string]any{"max_attempts": 2, "backoff": "-1s"}), 400, "retry.backoff", "negative"},
		{"bad backoff", "POST", tm, with("retry", map[string]any{"max_attempts": 2, "backoff": "later"}), 400, "retry.backoff", "Go duration"},
		{"duplicate app and name", "POST", tm, validTimer("existing"), 409, "name", "already exists"},
		{"put id mismatch", "PUT", tm + "/" + existing.ID, with("id", "OTHER"), 400, "id", "does not match"},
		{"put bad schedule", "PUT", tm + "/" + existing.ID, with("schedule", "@every soon"), 400, "schedule", ""},
		{"put unknown timer", "PUT", tm + "/NOPE", validTimer("x"), 404, "", "not found"},
		{"get unknown timer", "GET", tm + "/NOPE", nil, 404, "", "not found"},
		{"delete unknown timer", "DELETE", tm + "/NOPE", nil, 404, "", "not found"},
		{"enable unknown timer", "POST", tm + "/NOPE/enable", nil, 404, "", "not found"},
		{"trigger unknown timer", "POST", tm + "/NOPE/trigger", nil, 404, "", "not found"},
		{"runs of unknown timer", "GET", tm + "/NOPE/runs", nil, 404, "", "not found"},
		{"unknown run", "GET", "/api/v1/runs/NOPE", nil, 404, "", "not found"},
		{"unknown route", "GET", "/api/v1/nothing", nil, 404, "", "no route"},
		{"wrong method", "PATCH", tm + "/" + existing.ID, nil, 405, "", "not allowed"},
		{"wrong method on list", "DELETE", tm, nil, 405, "", "not allowed"},
		{"bad enabled filter", "GET", tm + "?enabled=maybe", nil, 400, "enabled", "true or false"},
		{"bad limit", "GET", tm + "?limit=0", nil, 400, "limit", "from 1 to 1000"},
		{"limit not a number", "GET", tm + "?limit=ten", nil, 400, "limit", ""},
		{"bad cursor", "GET", tm + "?cursor=%25%25", nil, 400, "cursor", "not a cursor"},
		{"hand-made run cursor", "GET", tm + "/" + existing.ID + "/runs?cursor=" +
			base64.RawURLEncoding.EncodeToString([]byte("r00000000garbage")), nil, 400, "cursor", "not a cursor"},
		{"bad run status", "GET", tm + "/" + existing.ID + "/runs?status=done", nil, 400, "status", "must be one of"},
		{"bad run before", "GET", tm + "/" + existing.ID + "/runs?before=yesterday", nil, 400, "before", "RFC 3339"},
		{"search too long", "GET", tm + "?search=" + strings.Repeat("x", 256), nil, 400, "search", "at most 255"},
		{"bad run limit", "GET", tm + "/" + existing.ID + "/runs?limit=5000", nil, 400, "limit", ""},
		{"next without spec", "GET", "/api/v1/schedule/next", nil, 400, "spec", "is required"},
		{"next bad spec", "GET", "/api/v1/schedule/next?spec=0+24+*+*+*", nil, 400, "spec", "hour: 24 is out of range 0-23"},
		{"next bad tz", "GET", "/api/v1/schedule/next?spec=@daily&tz=Nowhere/City", nil, 400, "tz", "unknown time zone"},
		{"next local tz", "GET", "/api/v1/schedule/next?spec=@daily&tz=Local", nil, 400, "tz", `unknown time zone "Local"`},
		{"next bad n", "GET", "/api/v1/schedule/next?spec=@daily&n=-1", nil, 400, "n", ""},
		{"next bad from", "GET", "/api/v1/schedule/next?spec=@daily&from=yesterday", nil, 400, "from", "RFC 3339"},
		{"next bad dst", "GET", "/api/v1/schedule/next?spec=@daily&dst=twice", nil, 400, "dst", `must be one of default, shift, skip_gap, both, wall, got "twice"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, b := e.do(t, tt.method, tt.path, tt.body)
			if code != tt.wantCode {
				t.Fatalf("status %d, want %d; body %s", code, tt.wantCode, b)
			}
			var eb struct {
				Error *struct {
					Field   *string `json:"field"`
					Message string  `json:"message"`
				} `json:"error"`
			}
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&eb); err != nil || eb.Error == nil {
				t.Fatalf("answer %s is not the error shape: %v", b, err)
			}
			field := ""
			if eb.Error.Field != nil {
				field = *eb.Error.Field
			}
			if field != tt.wantField {
				t.Errorf("field %q, want %q (message %q)", field, tt.wantField, eb.Error.Message)
			}
			if eb.Error.Message == "" || !strings.Contains(eb.Error.Message, tt.wantMsg) {
				t.Errorf("message %q, want it to contain %q", eb.Error.Message, tt.wantMsg)
			}
		})
	}
}

func TestShellAndHandlerAllowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) { c.AllowShell = true })
	sh := e.createTimer(t, with("name", "sh", "action", map[string]any{"type": "shell",
		"shell": map[string]any{"command": "echo", "args": []string{"hi"}}}))
	if sh.Action.Type != "shell" || sh.Action.Shell.Command != "echo" {
		t.Errorf("shell action = %+v", sh.Action)
	}
	h := e.createTimer(t, with("name", "h", "action", map[string]any{"type": "handler",
		"handler": map[string]any{"name": "cleanup", "args": map[string]any{"days": 3}}}))
	if h.Action.Handler == nil || string(h.Action.Handler.Args) != `{"days":3}` {
		t.Errorf("handler action = %+v", h.Action)
	}
}

func TestTimerCRUD(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	created := e.createTimer(t, validTimer("nightly"))
	if created.ID == "" || created.App != "billing" || created.Name != "nightly" {
		t.Fatalf("created = %+v", created)
	}
	// Defaults and normalisation.
	if !*created.Enabled || created.Timeout != "30s" || created.Retry.MaxAttempts != 1 || created.Retry.Backoff != "1s" {
		t.Errorf("defaults: enabled %v timeout %q retry %+v", *created.Enabled, created.Timeout, created.Retry)
	}
	if created.Action.HTTP.Method != "POST" {
		t.Errorf("method = %q, want POST", created.Action.HTTP.Method)
	}
	if !created.CreatedAt.Equal(testNow) || !created.UpdatedAt.Equal(testNow) {
		t.Errorf("created_at %v updated_at %v, want %v", created.CreatedAt, created.UpdatedAt, testNow)
	}
	// 12:30 in New York (UTC-5 on 1 March), next five days.
	if len(created.NextFireTimes) != 5 {
		t.Fatalf("next_fire_times = %v", created.NextFireTimes)
	}
	if got := created.NextFireTimes[0].Format(time.RFC3339); got != "2026-03-01T12:30:00-05:00" {
		t.Errorf("first fire = %s", got)
	}
	if saved := e.engine.SavedCalls(); len(saved) != 1 || !saved[0].ScheduleChanged || saved[0].Timer.ID != created.ID {
		t.Errorf("engine saved calls = %+v", saved)
	}
	stored, err := e.store.GetTimer(context.Background(), created.ID)
	if err != nil || stored.Action.HTTP.Method != "POST" || stored.Timezone != "America/New_York" {
		t.Fatalf("stored = %+v, %v", stored, err)
	}

	var got api.Timer
	e.doJSON(t, "GET", "/api/v1/timers/"+created.ID, nil, 200, &got)
	if got.ID != created.ID || got.Schedule != "30 12 * * *" {
		t.Errorf("get = %+v", got)
	}

	// PUT the GET answer back with a new description: not a schedule change,
	// and the read-only fields are accepted.
	if err := e.store.SetPlannedUntil(context.Background(), map[string]store.Plan{created.ID: {Until: testNow.Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	got.Description = "runs the books"
	var put api.Timer
	e.doJSON(t, "PUT", "/api/v1/timers/"+created.ID, got, 200, &put)
	if put.Description != "runs the books" || !put.CreatedAt.Equal(testNow) {
		t.Errorf("put = %+v", put)
	}
	saved := e.engine.SavedCalls()
	if last := saved[len(saved)-1]; last.ScheduleChanged {
		t.Errorf("description change reported as schedule change")
	}
	if st, _ := e.store.GetTimer(context.Background(), created.ID); !st.PlannedUntil.Equal(testNow.Add(time.Hour)) {
		t.Errorf("PlannedUntil = %v, want kept", st.PlannedUntil)
	}

	// A schedule change resets PlannedUntil.
	got.Schedule = "@every 10s"
	e.doJSON(t, "PUT", "/api/v1/timers/"+created.ID, got, 200, &put)
	saved = e.engine.SavedCalls()
	if last := saved[len(saved)-1]; !last.ScheduleChanged || !last.Timer.PlannedUntil.IsZero() {
		t.Errorf("schedule change: %+v", last)
	}
	if st, _ := e.store.GetTimer(context.Background(), created.ID); !st.PlannedUntil.IsZero() {
		t.Errorf("PlannedUntil = %v, want zero", st.PlannedUntil)
	}
	// @every counts from created_at.
	if want := testNow.Add(10 * time.Second); len(put.NextFireTimes) == 0 || !put.NextFireTimes[0].Equal(want) {
		t.Errorf("next fires of @every = %v, want first %v", put.NextFireTimes, want)
	}

	// Disable, disable again, enable.
	var dis api.Timer
	e.doJSON(t, "POST", "/api/v1/timers/"+created.ID+"/disable", nil, 200, &dis)
	if *dis.Enabled || dis.NextFireTimes == nil || len(dis.NextFireTimes) != 0 {
		t.Errorf("disabled = %+v, want next_fire_times []", dis)
	}
	n := len(e.engine.SavedCalls())
	e.doJSON(t, "POST", "/api/v1/timers/"+created.ID+"/disable", nil, 200, &dis)
	if len(e.engine.SavedCalls()) != n {
		t.Errorf("disabling twice saved again")
	}
	e.doJSON(t, "POST", "/api/v1/timers/"+created.ID+"/enable", nil, 200, &dis)
	if !*dis.Enabled {
		t.Errorf("enable: %+v", dis)
	}
	if last := e.engine.SavedCalls()[len(e.engine.SavedCalls())-1]; !last.ScheduleChanged || !last.Timer.Enabled {
		t.Errorf("enable saved %+v", last)
	}

	// Trigger, then see the run.
	var run api.Run
	e.doJSON(t, "POST", "/api/v1/timers/"+created.ID+"/trigger", nil, 201, &run)
	if run.TimerID != created.ID || run.Status != "pending" || !run.Manual {
		t.Errorf("trigger run = %+v", run)
	}
	var gotRun api.Run
	e.doJSON(t, "GET", "/api/v1/runs/"+run.ID, nil, 200, &gotRun)
	if gotRun.ID != run.ID || !gotRun.ScheduledAt.Equal(testNow) {
		t.Errorf("get run = %+v", gotRun)
	}
	var runs api.RunList
	e.doJSON(t, "GET", "/api/v1/timers/"+created.ID+"/runs?status=pending", nil, 200, &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].ID != run.ID || runs.NextCursor != "" {
		t.Errorf("runs = %+v", runs)
	}

	// Delete.
	code, body := e.do(t, "DELETE", "/api/v1/timers/"+created.ID, nil)
	if code != 204 || len(body) != 0 {
		t.Errorf("delete: %d %s", code, body)
	}
	if d := e.engine.DeletedCalls(); len(d) != 1 || d[0] != created.ID {
		t.Errorf("engine deleted calls = %v", d)
	}
	e.doJSON(t, "GET", "/api/v1/timers/"+created.ID, nil, 404, nil)
}

func TestListTimersPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	want := map[string]bool{}
	for i := range 5 {
		tm := validTimer(fmt.Sprintf("t%d", i))
		if i == 4 {
			tm["app"] = "other"
			tm["enabled"] = false
		}
		want[e.createTimer(t, tm).ID] = true
	}

	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		var page api.TimerList
		e.doJSON(t, "GET", "/api/v1/timers?limit=2&cursor="+cursor, nil, 200, &page)
		pages++
		for _, tm := range page.Timers {
			if seen[tm.ID] {
				t.Errorf("timer %s on two pages", tm.ID)
			}
			seen[tm.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		cursor = page.NextCursor
	}
	if len(seen) != 5 || pages != 3 {
		t.Errorf("saw %d timers in %d pages, want 5 in 3", len(seen), pages)
	}

	for _, tt := range []struct {
		query string
		want  int
	}{
		{"app=billing", 4},
		{"app=other", 1},
		{"enabled=false", 1},
		{"enabled=true&app=billing", 4},
		{"app=none", 0},
		{"search=T3", 1},
		{"search=t&app=other", 1},
		{"search=t&enabled=true", 4},
		{"search=%25", 0},
		{"search=nothing", 0},
	} {
		var page api.TimerList
		e.doJSON(t, "GET", "/api/v1/timers?"+tt.query, nil, 200, &page)
		if len(page.Timers) != tt.want {
			t.Errorf("%s: %d timers, want %d", tt.query, len(page.Timers), tt.want)
		}
	}
	// An empty list is [], not null.
	code, b := e.do(t, "GET", "/api/v1/timers?app=none", nil)
	if code != 200 || !strings.Contains(string(b), `"timers":[]`) {
		t.Errorf("empty list: %d %s", code, b)
	}
}

func TestListRunsPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tm := e.createTimer(t, validTimer("runs"))
	var runs []*model.Run
	for i := range 7 {
		at := testNow.Add(time.Duration(i) * time.Minute)
		runs = append(runs, &model.Run{ID: model.RunID(tm.ID, at), TimerID: tm.ID, ScheduledAt: at, DueAt: at,
			Status: model.RunPending, CreatedAt: testNow})
	}
	if _, err := e.store.InsertRuns(context.Background(), runs); err != nil {
		t.Fatal(err)
	}

	var got []time.Time
	cursor := ""
	for range 10 {
		var page api.RunList
		e.doJSON(t, "GET", "/api/v1/timers/"+tm.ID+"/runs?limit=3&cursor="+cursor, nil, 200, &page)
		for _, r := range page.Runs {
			got = append(got, r.ScheduledAt)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(got) != 7 {
		t.Fatalf("got %d runs, want 7", len(got))
	}
	// before keeps the runs scheduled before it: the UI's last run.
	var last api.RunList
	e.doJSON(t, "GET", "/api/v1/timers/"+tm.ID+"/runs?limit=1&before="+
		url.QueryEscape(testNow.Add(3*time.Minute).Format(time.RFC3339)), nil, 200, &last)
	if len(last.Runs) != 1 || !last.Runs[0].ScheduledAt.Equal(testNow.Add(2*time.Minute)) || last.NextCursor == "" {
		t.Errorf("runs before +3m, limit 1: %+v next %q", last.Runs, last.NextCursor)
	}
	for i := 1; i < len(got); i++ {
		if !got[i].Before(got[i-1]) {
			t.Errorf("runs not newest first: %v", got)
			break
		}
	}
	// A timers cursor is not a runs cursor.
	var tl api.TimerList
	for i := range 2 {
		e.createTimer(t, validTimer(fmt.Sprintf("extra%d", i)))
	}
	e.doJSON(t, "GET", "/api/v1/timers?limit=1", nil, 200, &tl)
	e.doJSON(t, "GET", "/api/v1/timers/"+tm.ID+"/runs?cursor="+tl.NextCursor, nil, 400, nil)
}

func TestScheduleNext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		query string
		want  []string
	}{
		{"spec=@every+10s&from=2026-01-01T00:00:00Z&n=3",
			[]string{"2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z", "2026-01-01T00:00:30Z"}},
		{"spec=0+12+*+*+*&tz=America/New_York&from=2026-03-01T00:00:00Z&n=2",
			[]string{"2026-03-01T12:00:00-05:00", "2026-03-02T12:00:00-05:00"}},
		{"spec=@every+1m&n=1", []string{"2026-03-01T10:31:00Z"}}, // from defaults to now
		// The daylight-saving choice: 02:30 does not exist on 2026-03-08.
		{"spec=30+2+*+*+*&tz=America/New_York&from=2026-03-07T12:00:00Z&n=2",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"spec=30+2+*+*+*&tz=America/New_York&from=2026-03-07T12:00:00Z&n=2&dst=default",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"spec=30+2+*+*+*&tz=America/New_York&from=2026-03-07T12:00:00Z&n=2&dst=shift",
			[]string{"2026-03-08T03:30:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"spec=30+2+*+*+*&tz=America/New_York&from=2026-03-07T12:00:00Z&n=2&dst=skip_gap",
			[]string{"2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"}},
		{"spec=30+1+*+*+*&tz=America/New_York&from=2026-10-31T12:00:00Z&n=2&dst=both",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"}},
		{"spec=30+1+*+*+*&tz=America/New_York&from=2026-10-31T12:00:00Z&n=2&dst=wall",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"}},
	}
	for _, tt := range tests {
		var out api.ScheduleTimes
		e.doJSON(t, "GET", "/api/v1/schedule/next?"+tt.query, nil, 200, &out)
		if fmt.Sprint(out.Times) != fmt.Sprint(tt.want) {
			t.Errorf("%s: times %v, want %v", tt.query, out.Times, tt.want)
		}
	}
	var out api.ScheduleTimes
	e.doJSON(t, "GET", "/api/v1/schedule/next?spec=@daily", nil, 200, &out)
	if len(out.Times) != 5 {
		t.Errorf("default n: %d times", len(out.Times))
	}
}

// TestTimerHistory: a timer's history is stored as given and answered as
// given; absent (the server's defaults) is absent from answers, and a PUT
// without it goes back to the defaults; 0 and "0s" (no limit) are kept.
func TestTimerHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := validTimer("kept")
	body["history"] = map[string]any{"keep": 50, "max_age": "48h"}
	created := e.createTimer(t, body)
	if h := created.History; h == nil || h.Keep == nil || *h.Keep != 50 || h.MaxAge != "48h0m0s" {
		t.Fatalf("created history = %+v", h)
	}
	stored, err := e.store.GetTimer(context.Background(), created.ID)
	if err != nil || stored.History.Keep == nil || *stored.History.Keep != 50 || stored.History.MaxAge == nil || *stored.History.MaxAge != 48*time.Hour {
		t.Fatalf("stored history = %+v, %v", stored.History, err)
	}
	var got api.Timer
	e.doJSON(t, "GET", "/api/v1/timers/"+created.ID, nil, 200, &got)
	if h := got.History; h == nil || *h.Keep != 50 || h.MaxAge != "48h0m0s" {
		t.Errorf("get history = %+v", h)
	}

	got.History = &api.History{MaxAge: "0s"}
	var put api.Timer
	e.doJSON(t, "PUT", "/api/v1/timers/"+created.ID, got, 200, &put)
	if h := put.History; h == nil || h.Keep != nil || h.MaxAge != "0s" {
		t.Errorf("put history = %+v, want max_age 0s only", h)
	}
	put.History = nil
	var back api.Timer
	e.doJSON(t, "PUT", "/api/v1/timers/"+created.ID, put, 200, &back)
	if back.History != nil {
		t.Errorf("history after a PUT without it = %+v, want none", back.History)
	}
	stored, err = e.store.GetTimer(context.Background(), created.ID)
	if err != nil || !stored.History.IsZero() {
		t.Errorf("stored history = %+v, %v; want none", stored.History, err)
	}
	plain := e.createTimer(t, validTimer("plain"))
	if plain.History != nil {
		t.Errorf("history of a timer without one = %+v", plain.History)
	}
}

// TestStatsCached: GET /api/v1/stats answers the counts it read last
// until they are StatsMaxAge old; then a call answers them once more and
// counts again in the background, and later calls see the new counts.
func TestStatsCached(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(testNow)
	e := newEnv(t, func(c *api.Config) { c.Clock = clk; c.StatsMaxAge = 10 * time.Second })
	e.createTimer(t, validTimer("a"))
	total := func() int64 { return e.timersTotal(t) }
	if n := total(); n != 1 {
		t.Fatalf("first stats: %d timers, want 1", n)
	}
	e.createTimer(t, validTimer("b"))
	clk.Advance(9 * time.Second)
	if n := total(); n != 1 {
		t.Errorf("stats within StatsMaxAge: %d timers, want the cached 1", n)
	}
	clk.Advance(time.Second)
	testenv.Eventually(t, 10*time.Second, "stats counted again", func() (bool, string) {
		n := total()
		return n == 2, fmt.Sprintf("%d timers", n)
	})
}

// timersTotal returns the timer count GET /api/v1/stats answers.
func (e *env) timersTotal(t *testing.T) int64 {
	t.Helper()
	var st api.Stats
	e.doJSON(t, "GET", "/api/v1/stats", nil, 200, &st)
	return st.Timers.Total
}

// slowStats is a store whose Stats takes d of clk's time.
type slowStats struct {
	api.Store
	clk *clock.Fake
	d   time.Duration
}

func (s slowStats) Stats(ctx context.Context) (store.Stats, error) {
	s.clk.Advance(s.d)
	return s.Store.Stats(ctx)
}

// TestStatsSlowCount: a count that takes long is made ten times rarer
// than it takes, when that is longer than StatsMaxAge.
func TestStatsSlowCount(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(testNow)
	e := newEnv(t, func(c *api.Config) {
		c.Clock = clk
		c.StatsMaxAge = 10 * time.Second
		c.Store = slowStats{Store: c.Store, clk: clk, d: 5 * time.Second}
	})
	total := func() int64 { return e.timersTotal(t) }
	if n := total(); n != 0 {
		t.Fatalf("first stats: %d timers", n)
	}
	e.createTimer(t, validTimer("a"))
	clk.Advance(45 * time.Second)
	if n := total(); n != 0 {
		t.Errorf("stats 45s after a 5s count: %d timers, want the cached 0", n)
	}
	clk.Advance(5 * time.Second)
	testenv.Eventually(t, 10*time.Second, "stats counted again", func() (bool, string) {
		n := total()
		return n == 1, fmt.Sprintf("%d timers", n)
	})
}

func TestStatsNodesHealth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createTimer(t, validTimer("a"))
	b := validTimer("b")
	b["enabled"] = false
	e.createTimer(t, b)

	var st api.Stats
	e.doJSON(t, "GET", "/api/v1/stats", nil, 200, &st)
	if st.Timers.Enabled != 1 || st.Timers.Disabled != 1 || st.Timers.Total != 2 {
		t.Errorf("timer stats = %+v", st.Timers)
	}
	if st.Pool.InUse != 2 || st.Pool.Capacity != 16 {
		t.Errorf("pool = %+v", st.Pool)
	}
	if _, ok := st.Runs["cancelled"]; !ok || len(st.Runs) != 6 {
		t.Errorf("runs by status = %v, want all six statuses", st.Runs)
	}

	var nodes api.NodeList
	e.doJSON(t, "GET", "/api/v1/nodes", nil, 200, &nodes)
	if len(nodes.Nodes) != 1 || nodes.Nodes[0].ID != "node-1" || len(nodes.Nodes[0].Slices) != 2 {
		t.Errorf("nodes = %+v", nodes)
	}

	e.doJSON(t, "GET", "/healthz", nil, 200, nil)
	e.doJSON(t, "GET", "/readyz", nil, 200, nil)
	e.engine.ReadyErr = errors.New("store unreachable") // no request is in flight
	code, body := e.do(t, "GET", "/readyz", nil)
	if code != 503 || !strings.Contains(string(body), "store unreachable") {
		t.Errorf("readyz not ready: %d %s", code, body)
	}

	code, body = e.do(t, "GET", "/metrics", nil)
	if code != 200 || !strings.Contains(string(body), "chime_test_total") {
		t.Errorf("metrics: %d %s", code, body)
	}
}

func TestUI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res, err := e.srv.Client().Get(e.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(b), "/api/v1") {
		t.Errorf("GET /: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	code, _ := e.do(t, "GET", "/ui/index.html", nil)
	if code != 200 {
		t.Errorf("GET /ui/index.html: %d", code)
	}
}

func TestPolicyPauseBackfill(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := validTimer("policy")
	body["schedule"] = "0 0 * * * *"
	body["policy"] = map[string]any{"misfire": "latest", "overlap": "skip", "catchup_window": "1h",
		"start_at": "2026-03-01T12:00:00Z", "end_at": "2026-03-01T14:00:00Z", "max_fires": 3}
	created := e.createTimer(t, body)
	p := created.Policy
	if p == nil || p.Misfire != "latest" || p.Overlap != "skip" || p.CatchupWindow != "1h0m0s" || p.MaxFires != 3 ||
		p.StartAt == nil || p.EndAt == nil || !p.EndAt.Equal(time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)) {
		t.Fatalf("policy = %+v", p)
	}
	// The bounds limit the next fires: 12:00, 13:00, 14:00 only.
	if n := len(created.NextFireTimes); n != 3 {
		t.Errorf("next fire times = %v, want 3 within the bounds", created.NextFireTimes)
	}
	var paused api.Timer
	e.doJSON(t, "POST", "/api/v1/timers/"+created.ID+"/pause", nil, 200, &paused)
	if !paused.Paused || !*paused.Enabled {
		t.Errorf("paused timer: paused %v, enabled %v; want paused and still enabled", paused.Paused, *paused.Enabled)
	}
	var resumed api.Timer
	e.doJSON(t, "POST", "/api/v1/timers/"+created.ID+"/resume", nil, 200, &resumed)
	if resumed.Paused || !*resumed.Enabled {
		t.Errorf("resumed timer: paused %v, enabled %v", resumed.Paused, *resumed.Enabled)
	}
	var bf api.BackfillResponse
	e.doJSON(t, "POST", "/api/v1/timers/"+created.ID+"/backfill",
		map[string]any{"from": "2026-02-28T00:00:00Z", "to": "2026-02-28T03:00:00Z"}, 201, &bf)
	if bf.Count != 4 || len(bf.Runs) != 4 || !bf.Runs[0].Manual {
		t.Errorf("backfill = %+v, want 4 manual runs (00:00 to 03:00)", bf)
	}
	// A default policy reads back with its defaults spelt out.
	plain := e.createTimer(t, validTimer("plain"))
	if plain.Policy == nil || plain.Policy.Misfire != "all" || plain.Policy.Overlap != "allow" ||
		plain.Policy.DST != "default" || plain.Policy.Jitter != "" {
		t.Errorf("default policy = %+v", plain.Policy)
	}
	// Jitter and the daylight-saving choice are stored and read back; the
	// next fire times follow the choice (02:30 New York, skipped on the
	// night it does not exist).
	jb := validTimer("jitter")
	jb["schedule"] = "30 2 * * *"
	jb["policy"] = map[string]any{"jitter": "90s", "dst": "skip_gap"}
	jittered := e.createTimer(t, jb)
	if jittered.Policy == nil || jittered.Policy.Jitter != "1m30s" || jittered.Policy.DST != "skip_gap" {
		t.Fatalf("policy = %+v", jittered.Policy)
	}
	var got api.Timer
	e.doJSON(t, "GET", "/api/v1/timers/"+jittered.ID, nil, 200, &got)
	if got.Policy == nil || got.Policy.Jitter != "1m30s" || got.Policy.DST != "skip_gap" {
		t.Errorf("GET policy = %+v", got.Policy)
	}
}

func TestStatsSeries(t *testing.T) {
	t.Parallel()
	s := metrics.NewSeries()
	s.Fire(testNow.Add(-2*time.Minute), "T1", "succeeded")
	s.Fire(testNow.Add(-2*time.Minute), "T2", "failed")
	s.Delay(testNow.Add(-2*time.Minute), "T1", 40*time.Millisecond)
	s.Fire(testNow.Add(-2*time.Hour), "T3", "failed") // out of the hour
	e := newEnv(t, func(c *api.Config) { c.Series = s })
	var out api.StatsSeries
	e.doJSON(t, "GET", "/api/v1/stats/series", nil, 200, &out)
	if out.StepSeconds != 60 || len(out.Points) != metrics.SeriesMinutes {
		t.Fatalf("step %d, %d points", out.StepSeconds, len(out.Points))
	}
	if last := out.Points[len(out.Points)-1]; !last.Start.Equal(testNow.Truncate(time.Minute)) {
		t.Errorf("last point at %v, want the minute of now", last.Start)
	}
	var fires int64
	for _, p := range out.Points {
		for _, n := range p.Fires {
			fires += n
		}
	}
	p := out.Points[len(out.Points)-3]
	if fires != 2 || p.Fires["succeeded"] != 1 || p.Fires["failed"] != 1 || p.Delays != 1 ||
		p.DelayP50MS < 40 || p.DelayP50MS > 50 || p.DelayP99MS != p.DelayP50MS {
		t.Errorf("two minutes ago: %+v (fires in the hour %d)", p, fires)
	}

	if len(out.Timers) != 1 || out.Timers[0].TimerID != "T2" || out.Timers[0].Failures != 1 || out.Timers[0].LastFailure == nil ||
		out.Timers[0].LastLate != nil {
		t.Errorf("failing timers: %+v", out.Timers)
	}

	// Without a series: an hour of zeros, in the same shape.
	code, b := newEnv(t).do(t, "GET", "/api/v1/stats/series", nil)
	if code != 200 || !strings.Contains(string(b), `"fires":{}`) || !strings.Contains(string(b), `"delays":0`) ||
		!strings.Contains(string(b), `"timers":[]`) {
		t.Errorf("no series: %d %.200s", code, b)
	}
}

func TestActionTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		shell bool
		want  string
	}{
		{false, "[http handler]"},
		{true, "[http handler shell]"},
	} {
		e := newEnv(t, func(c *api.Config) { c.AllowShell = tc.shell })
		var out api.ActionTypes
		e.doJSON(t, "GET", "/api/v1/action-types", nil, 200, &out)
		if got := fmt.Sprint(out.Types); got != tc.want {
			t.Errorf("AllowShell %v: %s, want %s", tc.shell, got, tc.want)
		}
	}
}
