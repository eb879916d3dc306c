package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/app/api"
)

func TestAppSecret(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	r := chime(t, srv, "", "app", "secret", "--app", "billing", "-o", "json")
	if r.code != 0 {
		t.Fatalf("secret: %+v", r)
	}
	var first api.SigningSecret
	if err := json.Unmarshal([]byte(r.stdout), &first); err != nil || first.App != "billing" || first.Version != 1 ||
		!strings.HasPrefix(first.Secret, "whsec_") {
		t.Fatalf("secret json %q: %v", r.stdout, err)
	}
	r = chime(t, srv, "", "app", "secret", "--app", "billing")
	if r.code != 0 || !strings.Contains(r.stdout, first.Secret) || !strings.Contains(r.stdout, "Version:") {
		t.Fatalf("secret table: %+v", r)
	}

	r = chime(t, srv, "", "app", "secret", "--app", "billing", "--rotate")
	if r.code != 0 || strings.Contains(r.stdout, first.Secret) || !strings.Contains(r.stdout, "Also signing:  version 1 until") {
		t.Fatalf("rotate: %+v", r)
	}
	r = chime(t, srv, "", "app", "secret", "--app", "billing", "--rotate", "--overlap", "0s", "-o", "json")
	var rot api.SigningSecret
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rot) != nil || rot.Version != 3 || len(rot.Active) != 1 {
		t.Fatalf("rotate --overlap 0s: %+v", r)
	}

	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"app", "secret"}, 2, "--app is required"},
		{[]string{"app", "secret", "--app", "billing", "--overlap", "1h"}, 2, "--overlap applies to --rotate"},
		{[]string{"app", "secret", "--app", "bad app"}, 1, "app: must be"},
		{[]string{"app", "secret", "--app", "billing", "--rotate", "--overlap", "soon"}, 1, "overlap: must be"},
		{[]string{"app"}, 2, "needs a subcommand"},
	} {
		r := chime(t, srv, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("%v: %+v, want exit %d with %q", tc.args, r, tc.code, tc.msg)
		}
	}
}

// TestAppSecretTokens: the secret needs a write token allowed the app;
// rotations are audited.
func TestAppSecretTokens(t *testing.T) {
	srv := apiServer(t, func(c *api.Config) { c.AdminToken = testAdmin })
	token := func(role, app string) string {
		r := chime(t, srv, "", "token", "create", "--name", role+" "+app, "--role", role, "--app", app, "--token", testAdmin)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.code != 0 || !strings.HasPrefix(lines[len(lines)-1], "chm_") {
			t.Fatalf("token create: %+v", r)
		}
		return lines[len(lines)-1]
	}
	reader, other, writer := token("read", "billing"), token("write", "other"), token("write", "billing")
	if r := chime(t, srv, "", "app", "secret", "--app", "billing"); r.code != 1 || !strings.Contains(r.stderr, "HTTP 401") {
		t.Fatalf("without a token: %+v", r)
	}
	for _, tok := range []string{reader, other} {
		if r := chime(t, srv, "", "app", "secret", "--app", "billing", "--token", tok); r.code != 1 || !strings.Contains(r.stderr, "HTTP 403") {
			t.Fatalf("with a token that may not: %+v", r)
		}
	}
	if r := chime(t, srv, "", "app", "secret", "--app", "billing", "--rotate", "--token", writer); r.code != 0 || !strings.Contains(r.stdout, "whsec_") {
		t.Fatalf("rotate with the app's write token: %+v", r)
	}
	if r := chime(t, srv, "", "audit", "--token", testAdmin); r.code != 0 || !strings.Contains(r.stdout, "secret.rotate") {
		t.Fatalf("audit: %+v", r)
	}
}

// TestAppSecretSetListDelete: "chime app secret set|list|delete" manage an
// app's secrets; the value is read from a file or standard input and never
// printed.
func TestAppSecretSetListDelete(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	const value = "s3cret-from-stdin"
	r := chime(t, srv, value+"\n", "app", "secret", "set", "API_TOKEN", "--app", "billing", "--value-file", "-",
		"--host", "api.example.com,hooks.example.com", "--command", "/usr/bin/sync")
	if r.code != 0 || !strings.Contains(r.stdout, "set secret API_TOKEN of app billing") || strings.Contains(r.stdout, value) {
		t.Fatalf("set: %+v", r)
	}
	r = chime(t, srv, "", "app", "secret", "list", "--app", "billing")
	if r.code != 0 || !strings.Contains(r.stdout, "API_TOKEN") || !strings.Contains(r.stdout, "api.example.com,hooks.example.com") ||
		!strings.Contains(r.stdout, "/usr/bin/sync") || strings.Contains(r.stdout, value) {
		t.Fatalf("list: %+v", r)
	}
	r = chime(t, srv, "", "app", "secret", "list", "--app", "billing", "-o", "json")
	var list api.AppSecrets
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list.Secrets) != 1 || strings.Contains(r.stdout, value) {
		t.Fatalf("list json: %+v", r)
	}
	// The signing secret command is still "app secret --app".
	if r = chime(t, srv, "", "app", "secret", "--app", "billing"); r.code != 0 || !strings.Contains(r.stdout, "whsec_") {
		t.Fatalf("signing secret: %+v", r)
	}
	if r = chime(t, srv, "", "app", "secret", "delete", "API_TOKEN", "--app", "billing"); r.code != 0 || !strings.Contains(r.stdout, "deleted secret API_TOKEN") {
		t.Fatalf("delete: %+v", r)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"app", "secret", "delete", "API_TOKEN", "--app", "billing"}, 1, "HTTP 404"},
		{[]string{"app", "secret", "set", "X", "--app", "billing", "--host", "a.test"}, 2, "--value-file is required"},
		{[]string{"app", "secret", "set", "X", "--app", "billing", "--value-file", "-"}, 2, "at least one --host or --command"},
		{[]string{"app", "secret", "set", "X", "--value-file", "-", "--host", "a.test"}, 2, "--app is required"},
		{[]string{"app", "secret", "set", "1-bad", "--app", "billing", "--value-file", "-", "--host", "a.test"}, 1, "name: "},
		{[]string{"app", "secret", "list"}, 2, "--app is required"},
	} {
		r := chime(t, srv, "v", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("%v: %+v, want exit %d with %q", tc.args, r, tc.code, tc.msg)
		}
	}
}
