package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/model"
)

func secretHTTPTimer(name string) map[string]any {
	return map[string]any{
		"app": "billing", "name": name, "schedule": "@every 1h",
		"action": map[string]any{"type": "http", "http": map[string]any{
			"method": "POST", "url": "https://hook-user:url-pass@example.com/hook?x=1",
			"header": map[string]any{"Authorization": "Bearer tok", "x-api-key": "key", "X-Signature": "sig-val",
				"Cookie": "c=val1", "Accept": "application/json"},
			"secret_headers": []string{"x-signature"},
		}},
	}
}

func secretShellTimer(name string) map[string]any {
	return map[string]any{
		"app": "billing", "name": name, "schedule": "@every 1h",
		"action": map[string]any{"type": "shell", "shell": map[string]any{
			"command": "backup", "args": []string{"-v"}, "env": map[string]any{"DB_PASSWORD": "env-pass", "MODE": "full"},
		}},
	}
}

// TestSecretsRedactedRoundTrip: secrets are answered redacted by create,
// GET, list and PUT; a GET answer PUT back keeps them; new values replace
// them.
func TestSecretsRedactedRoundTrip(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.AllowShell = true })
	ctx := context.Background()
	secrets := []string{"url-pass", "Bearer tok", `"key"`, "sig-val", "c=val1", "env-pass", "full"}
	noSecrets := func(what string, b []byte) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s shows secret %q: %s", what, s, b)
			}
		}
	}
	var created []*api.Timer
	for _, body := range []map[string]any{secretHTTPTimer("h"), secretShellTimer("s")} {
		code, b := e.do(t, "POST", "/api/v1/timers", body)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, b)
		}
		noSecrets("create answer", b)
		var tm api.Timer
		json.Unmarshal(b, &tm)
		created = append(created, &tm)
	}
	h, s := created[0], created[1]
	stored := map[string]*model.Timer{}
	for _, tm := range created {
		m, err := e.store.GetTimer(ctx, tm.ID)
		if err != nil {
			t.Fatal(err)
		}
		stored[tm.ID] = m
	}
	if got := stored[h.ID].Action.HTTP; got.Header["Authorization"] != "Bearer tok" || got.URL != "https://hook-user:url-pass@example.com/hook?x=1" {
		t.Fatalf("stored %+v", got)
	}

	// GET and list: every secret redacted, the rest shown.
	code, b := e.do(t, "GET", "/api/v1/timers/"+h.ID, nil)
	if code != 200 {
		t.Fatalf("GET %d %s", code, b)
	}
	noSecrets("GET", b)
	var got api.Timer
	json.Unmarshal(b, &got)
	wantHeader := map[string]string{"Authorization": model.Redacted, "x-api-key": model.Redacted, "X-Signature": model.Redacted,
		"Cookie": model.Redacted, "Accept": "application/json"}
	if !reflect.DeepEqual(got.Action.HTTP.Header, wantHeader) || got.Action.HTTP.URL != "https://hook-user:%3Credacted%3E@example.com/hook?x=1" {
		t.Errorf("GET action %+v", got.Action.HTTP)
	}
	code, b = e.do(t, "GET", "/api/v1/timers", nil)
	if code != 200 {
		t.Fatalf("list %d %s", code, b)
	}
	noSecrets("list", b)
	if !strings.Contains(string(b), "application/json") || !strings.Contains(string(b), `"MODE":"<redacted>"`) {
		t.Errorf("list: %s", b)
	}

	// PUT the GET answers back, with another description: nothing changes
	// but the description. The timer's URL with a literal <redacted>
	// password is taken too.
	for i, tm := range created {
		var cur map[string]any
		e.doJSON(t, "GET", "/api/v1/timers/"+tm.ID, nil, 200, &cur)
		cur["description"] = "edited"
		if i == 0 {
			cur["action"].(map[string]any)["http"].(map[string]any)["url"] = "https://hook-user:<redacted>@example.com/hook?x=1"
		}
		code, b := e.do(t, "PUT", "/api/v1/timers/"+tm.ID, cur)
		if code != 200 {
			t.Fatalf("PUT %d %s", code, b)
		}
		noSecrets("PUT answer", b)
		m, err := e.store.GetTimer(ctx, tm.ID)
		if err != nil {
			t.Fatal(err)
		}
		if m.Description != "edited" || !reflect.DeepEqual(m.Action, stored[tm.ID].Action) {
			t.Errorf("after PUT: %q %+v %+v, want %+v %+v", m.Description, m.Action.HTTP, m.Action.Shell,
				stored[tm.ID].Action.HTTP, stored[tm.ID].Action.Shell)
		}
	}

	// New values replace the stored ones; redacted others are kept.
	var cur map[string]any
	e.doJSON(t, "GET", "/api/v1/timers/"+h.ID, nil, 200, &cur)
	hh := cur["action"].(map[string]any)["http"].(map[string]any)
	hh["header"].(map[string]any)["Authorization"] = "Bearer new"
	hh["url"] = "https://hook-user:new-pass@example.com/hook?x=1"
	e.doJSON(t, "PUT", "/api/v1/timers/"+h.ID, cur, 200, nil)
	m, _ := e.store.GetTimer(ctx, h.ID)
	if m.Action.HTTP.Header["Authorization"] != "Bearer new" || m.Action.HTTP.Header["x-api-key"] != "key" ||
		m.Action.HTTP.URL != "https://hook-user:new-pass@example.com/hook?x=1" {
		t.Errorf("after new values: %+v", m.Action.HTTP)
	}
	e.doJSON(t, "GET", "/api/v1/timers/"+s.ID, nil, 200, &cur)
	cur["action"].(map[string]any)["shell"].(map[string]any)["env"].(map[string]any)["DB_PASSWORD"] = "env-new"
	e.doJSON(t, "PUT", "/api/v1/timers/"+s.ID, cur, 200, nil)
	if m, _ := e.store.GetTimer(ctx, s.ID); m.Action.Shell.Env["DB_PASSWORD"] != "env-new" || m.Action.Shell.Env["MODE"] != "full" {
		t.Errorf("after new env: %+v", m.Action.Shell.Env)
	}
}

// TestSecretsRedactedRefused: <redacted> cannot be created, nor kept for
// another destination.
func TestSecretsRedactedRefused(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.AllowShell = true })
	existing := e.createTimer(t, secretHTTPTimer("h"))
	shell := e.createTimer(t, secretShellTimer("s"))
	httpWith := func(name string, set func(h map[string]any)) map[string]any {
		b := secretHTTPTimer(name)
		set(b["action"].(map[string]any)["http"].(map[string]any))
		return b
	}
	redactedHeader := func(k string) func(h map[string]any) {
		return func(h map[string]any) { h["header"].(map[string]any)[k] = model.Redacted }
	}
	tests := []struct {
		name, method, path string
		body               map[string]any
		field              string
	}{
		{"create header", "POST", "/api/v1/timers", httpWith("n1", redactedHeader("Authorization")), "action.http.header.Authorization"},
		{"create listed header", "POST", "/api/v1/timers", httpWith("n2", redactedHeader("X-Signature")), "action.http.header.X-Signature"},
		{"create password", "POST", "/api/v1/timers", httpWith("n3", func(h map[string]any) {
			h["url"] = "https://u:%3Credacted%3E@example.com/"
		}), "action.http.url"},
		{"create env", "POST", "/api/v1/timers", func() map[string]any {
			b := secretShellTimer("n4")
			b["action"].(map[string]any)["shell"].(map[string]any)["env"] = map[string]any{"K": model.Redacted}
			return b
		}(), "action.shell.env.K"},
		{"put to another host", "PUT", "/api/v1/timers/" + existing.ID, httpWith("h", func(h map[string]any) {
			h["url"] = "https://evil.example/"
			h["header"].(map[string]any)["Authorization"] = model.Redacted
		}), "action.http.header.Authorization"},
		{"put redacted non-secret header", "PUT", "/api/v1/timers/" + existing.ID, httpWith("h", func(h map[string]any) {
			h["secret_headers"] = nil
			h["header"].(map[string]any)["X-Signature"] = model.Redacted
		}), "action.http.header.X-Signature"},
		{"put env to another command", "PUT", "/api/v1/timers/" + shell.ID, func() map[string]any {
			b := secretShellTimer("s")
			b["action"].(map[string]any)["shell"].(map[string]any)["command"] = "printenv"
			b["action"].(map[string]any)["shell"].(map[string]any)["env"] = map[string]any{"DB_PASSWORD": model.Redacted}
			return b
		}(), "action.shell.env.DB_PASSWORD"},
		{"bad secret header name", "POST", "/api/v1/timers", httpWith("n5", func(h map[string]any) {
			h["secret_headers"] = []string{"Bad Name"}
		}), "action.http.secret_headers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, b := e.do(t, tc.method, tc.path, tc.body)
			var eb api.ErrorBody
			json.Unmarshal(b, &eb)
			if code != http.StatusBadRequest || eb.Error.Field != tc.field {
				t.Fatalf("%d %s, want 400 on %s", code, b, tc.field)
			}
		})
	}
	if m, _ := e.store.GetTimer(context.Background(), existing.ID); m.Action.HTTP.Header["Authorization"] != "Bearer tok" {
		t.Errorf("refused PUT changed the timer: %+v", m.Action.HTTP)
	}
}

func TestShellAllowListAtCreation(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.AllowShell, c.ShellAllow = true, []string{"backup", "/usr/bin/tar"} })
	for cmd, want := range map[string]int{"backup": 201, "/usr/bin/tar": 201, "tar": 400, "sh": 400, "backup ": 400} {
		body := secretShellTimer("n" + strings.NewReplacer("/", "_", " ", "_").Replace(cmd))
		body["action"].(map[string]any)["shell"].(map[string]any)["command"] = cmd
		code, b := e.do(t, "POST", "/api/v1/timers", body)
		if code != want {
			t.Errorf("%q: %d %s, want %d", cmd, code, b, want)
		}
		if want == 400 && !strings.Contains(string(b), `"field":"action.shell.command"`) {
			t.Errorf("%q: %s", cmd, b)
		}
	}
}
