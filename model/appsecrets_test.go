package model

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestResolveAppSecrets(t *testing.T) {
	secrets := map[string]*AppSecret{
		"API":  {Name: "API", Value: "p@ss:w/rd", Hosts: []string{"api.test"}},
		"TOOL": {Name: "TOOL", Value: "t0", Commands: []string{"/bin/tool"}},
	}
	tests := []struct {
		name      string
		a         *Action
		want      *Action
		wantField string
		wantMsg   string
	}{
		{name: "header, userinfo and body",
			a:    httpAction("https://u:{{secret.API}}@API.test:8443/x", map[string]string{"X-K": "k {{ secret.API }}", "A": "b"}),
			want: httpAction("https://u:p%40ss%3Aw%2Frd@API.test:8443/x", map[string]string{"X-K": "k p@ss:w/rd", "A": "b"})},
		{name: "shell env", a: shellAction("/bin/tool", map[string]string{"T": "{{secret.TOOL}}"}),
			want: shellAction("/bin/tool", map[string]string{"T": "t0"})},
		{name: "other host", a: httpAction("https://evil.test/", map[string]string{"X-K": "{{secret.API}}"}),
			wantField: "action.http.header.X-K", wantMsg: `may not be sent to host "evil.test"`},
		{name: "userinfo host is not the host", a: httpAction("https://api.test:{{secret.API}}@evil.test/", nil),
			wantField: "action.http.url", wantMsg: `host "evil.test"`},
		{name: "other command", a: shellAction("/bin/sh", map[string]string{"T": "{{secret.TOOL}}"}),
			wantField: "action.shell.env.T", wantMsg: "may not be given to command"},
		{name: "host secret to a command", a: shellAction("/bin/tool", map[string]string{"T": "{{secret.API}}"}),
			wantField: "action.shell.env.T", wantMsg: "its commands: none"},
		{name: "missing", a: httpAction("https://api.test/", map[string]string{"X-K": "{{secret.NOPE}}"}),
			wantField: "action.http.header.X-K", wantMsg: "does not exist"},
		{name: "in the path", a: httpAction("https://api.test/{{secret.API}}", nil), wantField: "action.http.url", wantMsg: "may only appear"},
		{name: "in an arg", a: shellAction("/bin/tool", nil, "{{secret.TOOL}}"), wantField: "action.shell.args", wantMsg: "may only appear"},
		{name: "in handler args", a: handlerAction("h", `{"k":"{{secret.API}}"}`), wantField: "action.handler.args", wantMsg: "may only appear"},
		{name: "bad name", a: httpAction("https://api.test/", map[string]string{"X-K": "{{secret.a-b}}"}),
			wantField: "action.http.header.X-K", wantMsg: "does not name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.a.HasAppSecretRefs() {
				t.Fatal("HasAppSecretRefs = false")
			}
			used, err := tc.a.ResolveAppSecrets(secrets)
			if tc.wantField != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.wantField || !strings.Contains(fe.Message, tc.wantMsg) {
					t.Fatalf("err = %v, want %s: %s", err, tc.wantField, tc.wantMsg)
				}
				return
			}
			if err != nil || len(used) == 0 {
				t.Fatalf("used %q, err %v", used, err)
			}
			if !reflect.DeepEqual(tc.a, tc.want) {
				t.Errorf("got %+v %+v, want %+v %+v", tc.a.HTTP, tc.a.Shell, tc.want.HTTP, tc.want.Shell)
			}
		})
	}
	if httpAction("https://api.test/", map[string]string{"X": "{{other}}"}).HasAppSecretRefs() {
		t.Error("HasAppSecretRefs of a text without a reference")
	}
	if got := ScrubSecrets("a p@ss:w/rd b t0", []string{"p@ss:w/rd", "t0"}); got != "a "+Redacted+" b t0" {
		t.Errorf("ScrubSecrets = %q (values under 4 bytes are left)", got)
	}
}

func TestKeepNotifySecrets(t *testing.T) {
	old := []NotifyRule{{On: NotifyFailure, Webhook: &NotifyWebhook{URL: "https://h.test/tok"}},
		{On: NotifyConsecutiveFailures, Threshold: 3, Webhook: &NotifyWebhook{URL: "https://h.test/tok2"}}}
	tests := []struct {
		name      string
		rules     []NotifyRule
		want      []string
		wantField string
	}{
		{"same rules", RedactNotify(old), []string{"https://h.test/tok", "https://h.test/tok2"}, ""},
		{"new URL", []NotifyRule{{On: NotifyFailure, Webhook: &NotifyWebhook{URL: "https://n.test/"}}}, []string{"https://n.test/"}, ""},
		{"other event", []NotifyRule{{On: NotifyRecovery, Webhook: &NotifyWebhook{URL: Redacted}}}, nil, "notify[0].webhook.url"},
		{"other threshold", []NotifyRule{old[0], {On: NotifyConsecutiveFailures, Threshold: 2, Webhook: &NotifyWebhook{URL: Redacted}}},
			nil, "notify[1].webhook.url"},
		{"moved", []NotifyRule{{On: NotifyFailure, Email: &NotifyEmail{To: []string{"a@b.c"}}}, {On: NotifyFailure, Webhook: &NotifyWebhook{URL: Redacted}}},
			nil, "notify[1].webhook.url"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := KeepNotifySecrets("notify", tc.rules, old)
			if tc.wantField != "" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != tc.wantField {
					t.Fatalf("err = %v, want one on %s", err, tc.wantField)
				}
				return
			}
			var got []string
			for _, r := range tc.rules {
				got = append(got, r.Webhook.URL)
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if err := KeepNotifySecrets("notify", RedactNotify(old), nil); err == nil {
		t.Error("kept a URL on creation")
	}
	if old[0].Webhook.URL != "https://h.test/tok" {
		t.Error("RedactNotify changed its input")
	}
	if got := RedactTarget(ChannelWebhook, "https://u:p@H.test:8443/tok?x=1"); got != "https://h.test:8443/"+Redacted {
		t.Errorf("RedactTarget = %q", got)
	}
	if got := RedactTarget(ChannelEmail, "a@b.c"); got != "a@b.c" {
		t.Errorf("RedactTarget of an email = %q", got)
	}
}

func TestSentOfRedactsSecretArgs(t *testing.T) {
	r := SentOf(*handlerAction("h", `{"pw":"s3cret","u":"x"}`, "pw"))
	if string(r.Args) != `{"pw":"<redacted>","u":"x"}` {
		t.Errorf("args = %s", r.Args)
	}
}
