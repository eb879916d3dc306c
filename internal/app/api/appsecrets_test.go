package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
)

// TestKeptSecretCannotBeReaimed: a write token that cannot read a timer's
// secrets cannot keep them ("<redacted>") while it changes where or what
// the action sends. The attack: a timer that calls chime itself with an
// admin bearer token, re-aimed by a PUT at POST /api/v1/tokens, would
// return a new admin token as its run's output; a shell action keeping
// API_TOKEN would get other env variables that print it.
func TestKeptSecretCannotBeReaimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth, func(c *api.Config) { c.AllowShell = true })
	writer := e.newToken(t, "billing-writer", model.RoleWrite, "billing").Token
	self := map[string]any{
		"app": "billing", "name": "self", "schedule": "@every 1h",
		"action": map[string]any{"type": "http", "http": map[string]any{
			"method": "GET", "url": e.srv.URL + "/api/v1/timers?app=billing",
			"header": map[string]any{"Authorization": "Bearer " + rootToken, "Accept": "application/json"},
		}},
	}
	var tm api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: self, token: rootToken}, http.StatusCreated, &tm)
	shell := map[string]any{
		"app": "billing", "name": "sh", "schedule": "@every 1h",
		"action": map[string]any{"type": "shell", "shell": map[string]any{
			"command": "backup", "env": map[string]any{"API_TOKEN": "tok-" + rootToken},
		}},
	}
	var sh api.Timer
	e.mustSend(t, request{method: "POST", path: "/api/v1/timers", body: shell, token: rootToken}, http.StatusCreated, &sh)

	// edit GETs the timer as the writer sees it and changes it.
	edit := func(id string, change func(a map[string]any)) map[string]any {
		var cur map[string]any
		e.mustSend(t, request{method: "GET", path: "/api/v1/timers/" + id, token: writer}, 200, &cur)
		change(cur["action"].(map[string]any))
		return cur
	}
	httpOf := func(a map[string]any) map[string]any { return a["http"].(map[string]any) }
	tests := []struct {
		name, id string
		change   func(a map[string]any)
		field    string
		why      string
	}{
		{"to POST /api/v1/tokens", tm.ID, func(a map[string]any) {
			h := httpOf(a)
			h["method"], h["url"] = "POST", e.srv.URL+"/api/v1/tokens"
			h["body"] = `{"name":"stolen","role":"admin"}`
		}, "action.http.header.Authorization", "action.http.method changed"},
		{"path only", tm.ID, func(a map[string]any) { httpOf(a)["url"] = e.srv.URL + "/api/v1/tokens" },
			"action.http.header.Authorization", "action.http.url changed"},
		{"query only", tm.ID, func(a map[string]any) { httpOf(a)["url"] = e.srv.URL + "/api/v1/timers?app=ops" },
			"action.http.header.Authorization", "action.http.url changed"},
		{"body only", tm.ID, func(a map[string]any) { httpOf(a)["body"] = "x" },
			"action.http.header.Authorization", "action.http.body changed"},
		{"header added", tm.ID, func(a map[string]any) { httpOf(a)["header"].(map[string]any)["X-Forwarded-Host"] = "evil.test" },
			"action.http.header.Authorization", "action.http.header.X-Forwarded-Host changed"},
		{"shell env added", sh.ID, func(a map[string]any) {
			a["shell"].(map[string]any)["env"].(map[string]any)["DEBUG_PRINT_ENV"] = "1"
		}, "action.shell.env.API_TOKEN", "action.shell.env.DEBUG_PRINT_ENV changed"},
		{"shell args added", sh.ID, func(a map[string]any) { a["shell"].(map[string]any)["args"] = []string{"--verbose"} },
			"action.shell.env.API_TOKEN", "action.shell.args changed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, b := e.send(t, request{method: "PUT", path: "/api/v1/timers/" + tc.id, body: edit(tc.id, tc.change), token: writer})
			var eb api.ErrorBody
			json.Unmarshal(b, &eb)
			if code != http.StatusBadRequest || eb.Error.Field != tc.field || !strings.Contains(eb.Error.Message, tc.why) {
				t.Fatalf("%d %s, want 400 on %s saying %q", code, b, tc.field, tc.why)
			}
		})
	}
	ctx := context.Background()
	m, err := e.store.GetTimer(ctx, tm.ID)
	if err != nil || m.Action.HTTP.Method != "GET" || m.Action.HTTP.Header["Authorization"] != "Bearer "+rootToken {
		t.Fatalf("refused PUTs changed the timer: %+v, %v", m.Action.HTTP, err)
	}
	// With the secret given again, the change is the writer's own.
	body := edit(tm.ID, func(a map[string]any) {
		h := httpOf(a)
		h["url"] = e.srv.URL + "/api/v1/tokens"
		h["header"].(map[string]any)["Authorization"] = "Bearer mine"
	})
	e.mustSend(t, request{method: "PUT", path: "/api/v1/timers/" + tm.ID, body: body, token: writer}, 200, nil)
	if m, _ := e.store.GetTimer(ctx, tm.ID); m.Action.HTTP.Header["Authorization"] != "Bearer mine" {
		t.Errorf("after PUT with the secret: %+v", m.Action.HTTP)
	}
	// Changing only secret values keeps the others.
	body = edit(sh.ID, func(a map[string]any) {})
	e.mustSend(t, request{method: "PUT", path: "/api/v1/timers/" + sh.ID, body: body, token: writer}, 200, nil)
	if m, _ := e.store.GetTimer(ctx, sh.ID); m.Action.Shell.Env["API_TOKEN"] != "tok-"+rootToken {
		t.Errorf("unchanged shell timer: %+v", m.Action.Shell)
	}
}

// TestAppSecrets: PUT, GET and DELETE of app secrets, for app writers only,
// audited, values never answered; timers refer to them only where they may
// be sent.
func TestAppSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAuth, func(c *api.Config) { c.AllowShell = true })
	writer := e.newToken(t, "w", model.RoleWrite, "billing").Token
	reader := e.newToken(t, "r", model.RoleRead, "billing").Token
	other := e.newToken(t, "o", model.RoleWrite, "ops").Token
	const value = "s3cret-value-123"
	put := api.AppSecretRequest{Value: ptr(value), Hosts: []string{"API.example.com"}, Commands: []string{"/usr/bin/sync"}}
	path := "/api/v1/apps/billing/secrets/API_KEY"
	noValue := func(what string, b []byte) {
		t.Helper()
		if strings.Contains(string(b), value) {
			t.Errorf("%s shows the value: %s", what, b)
		}
	}

	for _, tok := range []string{reader, other} {
		for _, r := range []request{{method: "PUT", path: path, body: put}, {method: "GET", path: "/api/v1/apps/billing/secrets"},
			{method: "DELETE", path: path}} {
			r.token = tok
			if code, _, b := e.send(t, r); code != http.StatusForbidden {
				t.Errorf("%s %s: %d %s, want 403", r.method, r.path, code, b)
			}
		}
	}
	code, h, b := e.send(t, request{method: "PUT", path: path, body: put, token: writer})
	if code != 200 || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("PUT: %d %v %s", code, h, b)
	}
	noValue("PUT", b)
	var got api.AppSecret
	json.Unmarshal(b, &got)
	if got.Name != "API_KEY" || len(got.Hosts) != 1 || got.Hosts[0] != "api.example.com" || got.Commands[0] != "/usr/bin/sync" || got.CreatedAt.IsZero() {
		t.Errorf("PUT answer %+v", got)
	}
	var list api.AppSecrets
	code, _, b = e.send(t, request{method: "GET", path: "/api/v1/apps/billing/secrets", token: writer})
	noValue("GET", b)
	json.Unmarshal(b, &list)
	if code != 200 || list.App != "billing" || len(list.Secrets) != 1 || list.Secrets[0].Name != "API_KEY" {
		t.Errorf("GET: %d %s", code, b)
	}

	bad := []struct {
		name, path string
		body       any
		field      string
	}{
		{"no value", path, api.AppSecretRequest{Hosts: []string{"a.test"}}, "value"},
		{"nowhere", path, api.AppSecretRequest{Value: ptr("v")}, "hosts"},
		{"host with scheme", path, api.AppSecretRequest{Value: ptr("v"), Hosts: []string{"https://a.test/"}}, "hosts[0]"},
		{"bad name", "/api/v1/apps/billing/secrets/1bad-name", put, "name"},
		{"sealed prefix", path, api.AppSecretRequest{Value: ptr("enc:v1:abc"), Hosts: []string{"a.test"}}, "value"},
	}
	for _, tc := range bad {
		code, _, b := e.send(t, request{method: "PUT", path: tc.path, body: tc.body, token: writer})
		var eb api.ErrorBody
		json.Unmarshal(b, &eb)
		if code != 400 || eb.Error.Field != tc.field {
			t.Errorf("%s: %d %s, want 400 on %s", tc.name, code, b, tc.field)
		}
	}

	// Timers refer to it where it may go, and nowhere else.
	timer := func(name, url string, header map[string]any) map[string]any {
		return map[string]any{"app": "billing", "name": name, "schedule": "@every 1h",
			"action": map[string]any{"type": "http", "http": map[string]any{"method": "POST", "url": url, "header": header}}}
	}
	shellTimer := func(name, cmd string) map[string]any {
		return map[string]any{"app": "billing", "name": name, "schedule": "@every 1h",
			"action": map[string]any{"type": "shell", "shell": map[string]any{"command": cmd, "env": map[string]any{"K": "{{secret.API_KEY}}"}}}}
	}
	ok := []map[string]any{
		timer("ok-header", "https://api.example.com/x", map[string]any{"X-Client": "id {{secret.API_KEY}}"}),
		timer("ok-userinfo", "https://u:{{secret.API_KEY}}@api.example.com/x", nil),
		shellTimer("ok-shell", "/usr/bin/sync"),
	}
	for _, body := range ok {
		code, _, b := e.send(t, request{method: "POST", path: "/api/v1/timers", body: body, token: writer})
		if code != 201 {
			t.Errorf("%s: %d %s", body["name"], code, b)
		}
	}
	refused := []struct {
		body  map[string]any
		field string
		msg   string
	}{
		{timer("other-host", "https://evil.example.com/x", map[string]any{"X-Client": "{{secret.API_KEY}}"}), "action.http.header.X-Client", "may not be sent to host \"evil.example.com\""},
		{timer("missing", "https://api.example.com/x", map[string]any{"X-Client": "{{secret.NOPE}}"}), "action.http.header.X-Client", "does not have"},
		{timer("in-path", "https://api.example.com/{{secret.API_KEY}}", nil), "action.http.url", "may only appear"},
		{timer("in-host", "https://{{secret.API_KEY}}.example.com/", nil), "action.http.url", "may only appear"},
		{shellTimer("other-command", "/usr/bin/env"), "action.shell.env.K", "may not be given to command"},
	}
	for _, tc := range refused {
		code, _, b := e.send(t, request{method: "POST", path: "/api/v1/timers", body: tc.body, token: writer})
		var eb api.ErrorBody
		json.Unmarshal(b, &eb)
		if code != 400 || eb.Error.Field != tc.field || !strings.Contains(eb.Error.Message, tc.msg) {
			t.Errorf("%s: %d %s, want 400 on %s saying %q", tc.body["name"], code, b, tc.field, tc.msg)
		}
	}
	// The ops writer cannot use billing's secret in an ops timer.
	opsTimer := timer("ops", "https://api.example.com/x", map[string]any{"X-Client": "{{secret.API_KEY}}"})
	opsTimer["app"] = "ops"
	if code, _, b := e.send(t, request{method: "POST", path: "/api/v1/timers", body: opsTimer, token: other}); code != 400 {
		t.Errorf("ops timer with billing's secret: %d %s", code, b)
	}

	code, _, b = e.send(t, request{method: "DELETE", path: path, token: writer})
	if code != 204 {
		t.Fatalf("DELETE: %d %s", code, b)
	}
	if code, _, b := e.send(t, request{method: "DELETE", path: path, token: writer}); code != 404 {
		t.Errorf("DELETE again: %d %s", code, b)
	}
	entries, _, err := e.store.ListAudit(context.Background(), store.AuditFilter{App: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, en := range entries {
		if strings.HasPrefix(en.Action, "app_secret.") {
			actions = append(actions, en.Action+" "+en.Target+" "+en.TokenName)
			if strings.Contains(en.Detail, value) {
				t.Errorf("audit shows the value: %+v", en)
			}
		}
	}
	if strings.Join(actions, ",") != "app_secret.delete billing/API_KEY w,app_secret.set billing/API_KEY w" {
		t.Errorf("audit: %q", actions)
	}
}

func ptr[T any](v T) *T { return &v }

// TestNotifySecrets: notification webhook URLs are answered redacted (in
// timers, app defaults and runs' notifications) and kept only for the same
// rule.
func TestNotifySecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const hook = "https://hooks.example.com/services/T0KEN-path-secret"
	body := validTimer("n")
	body["notify"] = []map[string]any{{"on": "failure", "webhook": map[string]any{"url": hook}, "email": map[string]any{"to": []string{"ops@example.com"}}}}
	code, b := e.do(t, "POST", "/api/v1/timers", body)
	if code != 201 || strings.Contains(string(b), "T0KEN") || !strings.Contains(string(b), `"url":"\u003credacted\u003e"`) && !strings.Contains(string(b), `"url":"<redacted>"`) {
		t.Fatalf("create: %d %s", code, b)
	}
	var tm api.Timer
	json.Unmarshal(b, &tm)
	for _, p := range []string{"/api/v1/timers/" + tm.ID, "/api/v1/timers"} {
		if code, b := e.do(t, "GET", p, nil); code != 200 || strings.Contains(string(b), "T0KEN") || !strings.Contains(string(b), "ops@example.com") {
			t.Errorf("GET %s: %d %s", p, code, b)
		}
	}
	// Sent back as answered, the URL is kept.
	var cur map[string]any
	e.doJSON(t, "GET", "/api/v1/timers/"+tm.ID, nil, 200, &cur)
	cur["description"] = "edited"
	e.doJSON(t, "PUT", "/api/v1/timers/"+tm.ID, cur, 200, nil)
	if m, _ := e.store.GetTimer(ctx, tm.ID); m.Notify[0].Webhook.URL != hook || m.Description != "edited" {
		t.Errorf("after PUT: %+v", m.Notify[0].Webhook)
	}
	// Not for another rule, nor on creation.
	cur["notify"].([]any)[0].(map[string]any)["on"] = "recovery"
	code, b = e.do(t, "PUT", "/api/v1/timers/"+tm.ID, cur)
	if code != 400 || !strings.Contains(string(b), `"field":"notify[0].webhook.url"`) {
		t.Errorf("PUT with another rule: %d %s", code, b)
	}
	cur["notify"] = []any{map[string]any{"on": "recovery", "email": map[string]any{"to": []string{"a@example.com"}}},
		map[string]any{"on": "failure", "webhook": map[string]any{"url": model.Redacted}}}
	if code, b = e.do(t, "PUT", "/api/v1/timers/"+tm.ID, cur); code != 400 || !strings.Contains(string(b), `"field":"notify[1].webhook.url"`) {
		t.Errorf("PUT with the rule moved: %d %s", code, b)
	}
	body = validTimer("n2")
	body["notify"] = []map[string]any{{"on": "failure", "webhook": map[string]any{"url": model.Redacted}}}
	if code, b = e.do(t, "POST", "/api/v1/timers", body); code != 400 || !strings.Contains(string(b), `"field":"notify[0].webhook.url"`) {
		t.Errorf("create with a redacted URL: %d %s", code, b)
	}

	// App defaults.
	const appHook = "https://hooks.example.com/app-T0KEN"
	rules := map[string]any{"notify": []map[string]any{{"on": "failure", "webhook": map[string]any{"url": appHook}}}}
	if code, b = e.do(t, "PUT", "/api/v1/apps/billing/notify", rules); code != 200 || strings.Contains(string(b), "T0KEN") {
		t.Errorf("PUT app notify: %d %s", code, b)
	}
	var an map[string]any
	e.doJSON(t, "GET", "/api/v1/apps/billing/notify", nil, 200, &an)
	if u := an["notify"].([]any)[0].(map[string]any)["webhook"].(map[string]any)["url"]; u != model.Redacted {
		t.Errorf("GET app notify url %v", u)
	}
	e.doJSON(t, "PUT", "/api/v1/apps/billing/notify", an, 200, nil)
	if got, _ := e.store.AppNotify(ctx, "billing"); len(got) != 1 || got[0].Webhook.URL != appHook {
		t.Errorf("app notify after PUT back: %+v", got)
	}

	// A run's notifications show the webhook's origin only.
	var run api.Run
	e.doJSON(t, "POST", "/api/v1/timers/"+tm.ID+"/trigger", nil, 201, &run)
	if _, err := e.store.ClaimRuns(ctx, []store.Claim{{RunID: run.ID, Node: "n1", LeaseUntil: testNow.Add(time.Minute), Now: testNow}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.store.FinishRuns(ctx, []model.Result{{RunID: run.ID, Node: "n1", Attempt: 1, Status: model.RunFailed,
		StartedAt: testNow, FinishedAt: testNow, Notify: true, TimerID: tm.ID}}); err != nil {
		t.Fatal(err)
	}
	evs, err := e.store.ClaimNotifyEvents(ctx, testNow.Add(time.Second), testNow.Add(time.Minute), 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %v, %v", evs, err)
	}
	n := &model.Notification{ID: run.ID + ".1.0.webhook", RunID: run.ID, TimerID: tm.ID, App: "billing", On: model.NotifyFailure,
		Channel: model.ChannelWebhook, Target: hook, Payload: []byte(`{}`), Status: model.NotificationFailed,
		Error: "http status 500", NextAt: testNow, CreatedAt: testNow}
	if err := e.store.ExpandNotifyEvent(ctx, evs[0], []*model.Notification{n}); err != nil {
		t.Fatal(err)
	}
	code, b = e.do(t, "GET", "/api/v1/runs/"+run.ID, nil)
	if code != 200 || strings.Contains(string(b), "T0KEN") || !strings.Contains(string(b), "https://hooks.example.com/") {
		t.Errorf("run: %d %s", code, b)
	}
}

// TestHandlerSecretArgs: the args named in secret_args are answered
// redacted and kept by a PUT that changes nothing else.
func TestHandlerSecretArgs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	body := map[string]any{"app": "billing", "name": "h", "schedule": "@every 1h",
		"action": map[string]any{"type": "handler", "handler": map[string]any{"name": "cleanup",
			"args": map[string]any{"user": "svc", "password": "arg-s3cret"}, "secret_args": []string{"password"}}}}
	code, b := e.do(t, "POST", "/api/v1/timers", body)
	if code != 201 || strings.Contains(string(b), "arg-s3cret") || !strings.Contains(string(b), "svc") {
		t.Fatalf("create: %d %s", code, b)
	}
	var tm api.Timer
	json.Unmarshal(b, &tm)
	var cur map[string]any
	e.doJSON(t, "GET", "/api/v1/timers/"+tm.ID, nil, 200, &cur)
	cur["description"] = "edited"
	e.doJSON(t, "PUT", "/api/v1/timers/"+tm.ID, cur, 200, nil)
	if m, _ := e.store.GetTimer(ctx, tm.ID); !strings.Contains(string(m.Action.Handler.Args), `"password":"arg-s3cret"`) {
		t.Errorf("after PUT: %s", m.Action.Handler.Args)
	}
	cur["action"].(map[string]any)["handler"].(map[string]any)["args"].(map[string]any)["user"] = "root"
	if code, b = e.do(t, "PUT", "/api/v1/timers/"+tm.ID, cur); code != 400 || !strings.Contains(string(b), `"field":"action.handler.args.password"`) {
		t.Errorf("PUT with other args: %d %s", code, b)
	}
	body["name"] = "h2"
	body["action"].(map[string]any)["handler"].(map[string]any)["args"] = map[string]any{"password": 42}
	if code, b = e.do(t, "POST", "/api/v1/timers", body); code != 400 || !strings.Contains(string(b), `"field":"action.handler.args.password"`) {
		t.Errorf("non-string secret arg: %d %s", code, b)
	}
}
