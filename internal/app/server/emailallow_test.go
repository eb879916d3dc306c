package server

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/app/builtin"
)

// TestEmailAllowThroughAPI: with --smtp-from chime@example.com and no
// --email-allow, a send_email timer or a notify rule to another domain is
// refused at save with 400 naming the field; the sender's domain and the
// addresses --email-allow lists are accepted.
func TestEmailAllowThroughAPI(t *testing.T) {
	dir := t.TempDir()
	base := startServer(t, Config{DataDir: dir, DB: "sqlite://" + filepath.Join(dir, "chime.db"),
		SMTP: builtin.SMTPConfig{Host: "127.0.0.1", Port: 1, From: "chime@example.com", Allow: []string{"example.com", "oncall@partner.test"}}})
	email := func(name, to string) map[string]any {
		return map[string]any{"app": "a", "name": name, "schedule": "@every 1h",
			"action": map[string]any{"type": "handler", "handler": map[string]any{"name": "send_email",
				"args": map[string]any{"to": []string{to}, "subject": "s"}}}}
	}
	notify := func(name, to string) map[string]any {
		return map[string]any{"app": "a", "name": name, "schedule": "@every 1h",
			"action": map[string]any{"type": "http", "http": map[string]any{"url": "http://127.0.0.1:9/"}},
			"notify": []map[string]any{{"on": "failure", "email": map[string]any{"to": []string{to}}}}}
	}
	for i, tc := range []struct {
		body  map[string]any
		field string // "" when accepted
	}{
		{email("e1", "ops@example.com"), ""},
		{email("e2", "oncall@partner.test"), ""},
		{email("e3", "attacker@evil.test"), "action.handler.args"},
		{email("e4", "dev@partner.test"), "action.handler.args"},
		{notify("n1", "ops@example.com"), ""},
		{notify("n2", "attacker@evil.test"), "notify[0].email.to"},
	} {
		code, b := call(t, "POST", base+"/api/v1/timers", tc.body)
		if tc.field == "" && code != 201 || tc.field != "" && (code != 400 || !strings.Contains(string(b), `"field":"`+tc.field+`"`) || !strings.Contains(string(b), "--email-allow")) {
			t.Errorf("%d: %d %s, want field %q", i, code, b, tc.field)
		}
	}
}
