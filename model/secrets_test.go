package model

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func httpAction(url string, header map[string]string, secret ...string) *Action {
	return &Action{Type: ActionHTTP, HTTP: &HTTPAction{Method: "POST", URL: url, Header: header, SecretHeaders: secret}}
}

func shellAction(cmd string, env map[string]string, args ...string) *Action {
	return &Action{Type: ActionShell, Shell: &ShellAction{Command: cmd, Args: args, Env: env}}
}

func handlerAction(name, args string, secret ...string) *Action {
	return &Action{Type: ActionHandler, Handler: &HandlerAction{Name: name, Args: json.RawMessage(args), SecretArgs: secret}}
}

func TestIsSecretHeader(t *testing.T) {
	h := &HTTPAction{SecretHeaders: []string{"X-Sig"}}
	for name, want := range map[string]bool{
		"Authorization": true, "x-auth-token": true, "PRIVATE-TOKEN": true, "X-Vault-Token": true, "x-amz-security-token": true,
		"X-Webhook-Secret": true, "X-Upload-TOKEN": true, "X-Password": true, "X-Key-Id": true, "Monkey": true, "x-sig": true,
		"Accept": false, "Content-Type": false, "X-Request-Id": false, "Keep-Alive": false,
	} {
		if got := h.IsSecretHeader(name); got != want {
			t.Errorf("IsSecretHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestWalkSecrets(t *testing.T) {
	tests := []struct {
		name string
		a    *Action
		want []string // Field=value, in walk order
	}{
		{"http", httpAction("https://u:p%40ss@h.test/x?q=1",
			map[string]string{"authorization": "Bearer t", "X-API-KEY": "k", "Cookie": "c=1", "proxy-authorization": "pa",
				"X-Sig": "s", "Accept": "a"}, "x-sig"),
			[]string{"action.http.header.Cookie=c=1", "action.http.header.X-API-KEY=k", "action.http.header.X-Sig=s",
				"action.http.header.authorization=Bearer t", "action.http.header.proxy-authorization=pa", "action.http.url=p@ss"}},
		{"no password", httpAction("https://u@h.test/", nil), nil},
		{"no userinfo", httpAction("https://h.test/a@b", nil), nil},
		{"empty password", httpAction("https://u:@h.test/", nil), []string{"action.http.url="}},
		{"shell", shellAction("sh", map[string]string{"B": "2", "A": "1"}), []string{"action.shell.env.A=1", "action.shell.env.B=2"}},
		{"handler", &Action{Type: ActionHandler, Handler: &HandlerAction{Name: "x"}}, nil},
		{"handler secret args", handlerAction("x", `{"b":"2","a":"1","n":3,"c":"x"}`, "b", "a", "n", "missing"),
			[]string{"action.handler.args.a=1", "action.handler.args.b=2"}},
		{"handler args not an object", handlerAction("x", `["a"]`, "a"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := tc.a.WalkSecrets(func(ref SecretRef, v string) (string, error) {
				got = append(got, ref.Field+"="+v)
				return v, nil
			})
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("walk = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestRedactDoesNotTouchOriginal(t *testing.T) {
	a := httpAction("https://u:pw@h.test/p", map[string]string{"Authorization": "Bearer t", "Accept": "json"})
	r := a.Clone()
	r.Redact()
	if a.HTTP.Header["Authorization"] != "Bearer t" || a.HTTP.URL != "https://u:pw@h.test/p" {
		t.Fatalf("original changed: %+v", a.HTTP)
	}
	if r.HTTP.Header["Authorization"] != Redacted || r.HTTP.Header["Accept"] != "json" || r.HTTP.URL != "https://u:%3Credacted%3E@h.test/p" {
		t.Fatalf("redacted: %+v", r.HTTP)
	}
}

func TestKeepSecrets(t *testing.T) {
	old := httpAction("https://u:pw@h.test/p", map[string]string{"Authorization": "Bearer t", "X-Sig": "s", "Accept": "json"}, "X-Sig")
	oldShell := shellAction("backup", map[string]string{"TOKEN": "t0", "MODE": "full"}, "-v")
	tests := []struct {
		name      string
		a, old    *Action
		want      *Action
		wantField string
		wantWhy   string // in the message
	}{
		{name: "keep all, literal password",
			a:    httpAction("https://u:<redacted>@h.test/p", map[string]string{"Authorization": Redacted, "X-Sig": Redacted, "Accept": "json"}, "X-Sig"),
			old:  old,
			want: httpAction("https://u:pw@h.test/p", map[string]string{"Authorization": "Bearer t", "X-Sig": "s", "Accept": "json"}, "X-Sig")},
		{name: "encoded password, other secret values",
			a:    httpAction("https://u:%3Credacted%3E@h.test/p", map[string]string{"Authorization": "Bearer new", "X-Sig": "s2", "Accept": "json"}, "X-Sig"),
			old:  old,
			want: httpAction("https://u:pw@h.test/p", map[string]string{"Authorization": "Bearer new", "X-Sig": "s2", "Accept": "json"}, "X-Sig")},
		{name: "other path", a: httpAction("https://u:pw2@h.test/api/v1/tokens", map[string]string{"Authorization": Redacted, "X-Sig": "s", "Accept": "json"}, "X-Sig"),
			old: old, wantField: "action.http.header.Authorization", wantWhy: "action.http.url changed"},
		{name: "other query", a: httpAction("https://u:<redacted>@h.test/p?x=1", map[string]string{"Authorization": "a", "X-Sig": "s", "Accept": "json"}, "X-Sig"),
			old: old, wantField: "action.http.url", wantWhy: "action.http.url changed"},
		{name: "other method", a: func() *Action {
			a := httpAction("https://u:<redacted>@h.test/p", map[string]string{"Authorization": "a", "X-Sig": "s", "Accept": "json"}, "X-Sig")
			a.HTTP.Method = "PUT"
			return a
		}(), old: old, wantField: "action.http.url", wantWhy: "action.http.method changed"},
		{name: "other body", a: func() *Action {
			a := httpAction("https://u:<redacted>@h.test/p", map[string]string{"Authorization": "a", "X-Sig": "s", "Accept": "json"}, "X-Sig")
			a.HTTP.Body = `{"role":"admin"}`
			return a
		}(), old: old, wantField: "action.http.url", wantWhy: "action.http.body changed"},
		{name: "header added", a: httpAction("https://u:pw@h.test/p", map[string]string{"Authorization": Redacted, "X-Sig": "s", "Accept": "json", "X-Forwarded-Host": "evil"}, "X-Sig"),
			old: old, wantField: "action.http.header.Authorization", wantWhy: "action.http.header.X-Forwarded-Host changed"},
		{name: "header value changed", a: httpAction("https://u:pw@h.test/p", map[string]string{"Authorization": Redacted, "X-Sig": "s", "Accept": "xml"}, "X-Sig"),
			old: old, wantField: "action.http.header.Authorization", wantWhy: "action.http.header.Accept changed"},
		{name: "header case changed", a: httpAction("https://u:pw@h.test/p", map[string]string{"authorization": Redacted, "X-Sig": "s", "Accept": "json"}, "X-Sig"),
			old: old, wantField: "action.http.header.authorization"},
		{name: "secret headers changed", a: httpAction("https://u:pw@h.test/p", map[string]string{"Authorization": Redacted, "X-Sig": "s", "Accept": "json"}),
			old: old, wantField: "action.http.header.Authorization", wantWhy: "action.http.header.X-Sig changed"},
		{name: "new values replace",
			a:    httpAction("https://u:new@h.test/p", map[string]string{"Authorization": "Bearer new"}),
			old:  old,
			want: httpAction("https://u:new@h.test/p", map[string]string{"Authorization": "Bearer new"})},
		{name: "create", a: httpAction("https://h.test/", map[string]string{"X-Api-Key": Redacted}), wantField: "action.http.header.X-Api-Key"},
		{name: "create password", a: httpAction("https://u:<redacted>@h.test/", nil), wantField: "action.http.url"},
		{name: "other host", a: httpAction("https://evil.test/p", map[string]string{"Authorization": Redacted}), old: old,
			wantField: "action.http.header.Authorization"},
		{name: "other port", a: httpAction("https://u:<redacted>@h.test:8443/p", nil), old: old, wantField: "action.http.url"},
		{name: "other scheme", a: httpAction("http://u:<redacted>@h.test/p", nil), old: old, wantField: "action.http.url"},
		{name: "no stored value", a: httpAction("https://h.test/p", map[string]string{"Cookie": Redacted}), old: old,
			wantField: "action.http.header.Cookie"},
		{name: "not a secret header", a: httpAction("https://h.test/p", map[string]string{"X-Sig": Redacted}), old: old,
			wantField: "action.http.header.X-Sig"},
		{name: "shell keep",
			a:    shellAction("backup", map[string]string{"TOKEN": Redacted, "MODE": "diff"}, "-v"),
			old:  oldShell,
			want: shellAction("backup", map[string]string{"TOKEN": "t0", "MODE": "diff"}, "-v")},
		{name: "shell env added", a: shellAction("backup", map[string]string{"TOKEN": Redacted, "MODE": "full", "SHELLOPTS": "xtrace"}, "-v"), old: oldShell,
			wantField: "action.shell.env.TOKEN", wantWhy: "action.shell.env.SHELLOPTS changed"},
		{name: "shell env removed", a: shellAction("backup", map[string]string{"TOKEN": Redacted}, "-v"), old: oldShell,
			wantField: "action.shell.env.TOKEN", wantWhy: "action.shell.env.MODE changed"},
		{name: "shell dir", a: func() *Action {
			a := shellAction("backup", map[string]string{"TOKEN": Redacted, "MODE": "full"}, "-v")
			a.Shell.Dir = "/tmp"
			return a
		}(), old: oldShell, wantField: "action.shell.env.TOKEN", wantWhy: "action.shell.dir changed"},
		{name: "handler keep",
			a:    handlerAction("h", `{"user":"u","pw":"<redacted>"}`, "pw"),
			old:  handlerAction("h", `{"pw":"p0", "user":"u"}`, "pw"),
			want: handlerAction("h", `{"pw":"p0","user":"u"}`, "pw")},
		{name: "handler args changed", a: handlerAction("h", `{"user":"v","pw":"<redacted>"}`, "pw"), old: handlerAction("h", `{"pw":"p0","user":"u"}`, "pw"),
			wantField: "action.handler.args.pw", wantWhy: "action.handler.args changed"},
		{name: "handler name changed", a: handlerAction("g", `{"user":"u","pw":"<redacted>"}`, "pw"), old: handlerAction("h", `{"pw":"p0","user":"u"}`, "pw"),
			wantField: "action.handler.args.pw", wantWhy: "action.handler.name changed"},
		{name: "shell other args", a: shellAction("backup", map[string]string{"TOKEN": Redacted}, "-x"), old: oldShell,
			wantField: "action.shell.env.TOKEN"},
		{name: "shell other command", a: shellAction("printenv", map[string]string{"TOKEN": Redacted}, "-v"), old: oldShell,
			wantField: "action.shell.env.TOKEN"},
		{name: "shell env key is case-sensitive", a: shellAction("backup", map[string]string{"token": Redacted}, "-v"), old: oldShell,
			wantField: "action.shell.env.token"},
		{name: "type changed", a: shellAction("backup", map[string]string{"TOKEN": Redacted}, "-v"), old: old,
			wantField: "action.shell.env.TOKEN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.KeepSecrets(tc.old)
			if tc.wantField != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.wantField || !strings.Contains(fe.Message, Redacted) || !strings.Contains(fe.Message, tc.wantWhy) {
					t.Fatalf("err = %v, want a field error on %s", err, tc.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tc.a, tc.want) {
				t.Errorf("got %+v / %+v, want %+v / %+v", tc.a.HTTP, tc.a.Shell, tc.want.HTTP, tc.want.Shell)
			}
		})
	}
	if old.HTTP.Header["Authorization"] != "Bearer t" {
		t.Error("KeepSecrets changed the old action")
	}
}
