package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/internal/store"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

func TestCallbackURLEgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, u := range []string{
		"http://169.254.169.254/latest/meta-data",
		"http://[::ffff:169.254.169.254]/latest/meta-data",
		"http://[::ffff:a9fe:a9fe]:8080/",
		"https://[fd00:ec2::254]/latest/meta-data",
		"http://0.0.0.0:8080/",
		"http://[fe80::1%25eth0]/",
	} {
		code, b := e.do(t, "POST", "/api/v1/timers", with("action", httpAction("POST", u)))
		assertError(t, code, b, http.StatusBadRequest, "action.http.url", "egress policy")
	}
	// Names pass at creation (the sender checks what they resolve to);
	// loopback and private addresses are allowed by default.
	for i, u := range []string{"http://metadata.google.internal/", "http://127.0.0.1:9000/hook", "http://10.1.2.3/hook"} {
		e.createTimer(t, with("action", httpAction("POST", u), "name", "ok"+string(rune('a'+i))))
	}
	// PUT is checked too.
	tm := e.createTimer(t, validTimer("put"))
	code, b := e.do(t, "PUT", "/api/v1/timers/"+tm.ID, with("name", "put", "action", httpAction("POST", "http://169.254.169.254/")))
	assertError(t, code, b, http.StatusBadRequest, "action.http.url", "169.254.169.254 is denied (in 169.254.0.0/16)")

	// --callback-allow lets a denied address through; --callback-deny adds.
	p, err := egress.NewPolicy([]string{"10.0.0.0/8"}, []string{"169.254.169.254"})
	if err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, func(c *api.Config) { c.Egress = p })
	e2.createTimer(t, with("action", httpAction("POST", "http://169.254.169.254/latest/meta-data")))
	code, b = e2.do(t, "POST", "/api/v1/timers", with("name", "private", "action", httpAction("POST", "http://10.1.2.3/hook")))
	assertError(t, code, b, http.StatusBadRequest, "action.http.url", "10.0.0.0/8")
}

func assertError(t *testing.T, code int, b []byte, wantCode int, field, msg string) {
	t.Helper()
	var eb api.ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil {
		t.Fatalf("status %d, body %s: %v", code, b, err)
	}
	if code != wantCode || eb.Error.Field != field || !strings.Contains(eb.Error.Message, msg) {
		t.Fatalf("status %d, error %+v; want %d on %s containing %q", code, eb.Error, wantCode, field, msg)
	}
}

func TestSigningSecretRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The app's first timer makes its secret.
	e.createTimer(t, validTimer("first"))
	ss, err := e.store.ActiveSigningSecrets(t.Context(), "billing", testNow)
	if err != nil || len(ss) != 1 {
		t.Fatalf("secrets after the first timer: %v, %v", ss, err)
	}
	var got api.SigningSecret
	e.doJSON(t, "GET", "/api/v1/apps/billing/signing-secret", nil, http.StatusOK, &got)
	if got.App != "billing" || got.Secret != ss[0].Secret || got.Version != 1 || !got.CreatedAt.Equal(testNow) || len(got.Active) != 1 {
		t.Fatalf("GET: %+v", got)
	}
	if _, err := webhook.ParseSecret(got.Secret); err != nil || !strings.HasPrefix(got.Secret, "whsec_") {
		t.Fatalf("secret %q: %v", got.Secret, err)
	}

	// A second timer keeps it; moving a timer to a new app makes one there.
	tm := e.createTimer(t, validTimer("second"))
	e.doJSON(t, "PUT", "/api/v1/timers/"+tm.ID, with("name", "second", "app", "moved"), http.StatusOK, nil)
	if ms, _ := e.store.ActiveSigningSecrets(t.Context(), "moved", testNow); len(ms) != 1 {
		t.Fatalf("moved app has %d secrets", len(ms))
	}
	var again api.SigningSecret
	e.doJSON(t, "GET", "/api/v1/apps/billing/signing-secret", nil, http.StatusOK, &again)
	if again.Secret != got.Secret {
		t.Fatal("the secret changed without a rotation")
	}

	// GET on an app without timers creates its secret.
	var fresh api.SigningSecret
	e.doJSON(t, "GET", "/api/v1/apps/fresh/signing-secret", nil, http.StatusOK, &fresh)
	if fresh.Version != 1 || fresh.Secret == got.Secret {
		t.Fatalf("fresh app: %+v", fresh)
	}

	// Rotation: a new version; the old one signs for the overlap.
	var rot api.SigningSecret
	e.doJSON(t, "POST", "/api/v1/apps/billing/signing-secret/rotate", nil, http.StatusCreated, &rot)
	if rot.Version != 2 || rot.Secret == got.Secret || len(rot.Active) != 2 || rot.Active[1].Secret != got.Secret ||
		rot.Active[1].ExpiresAt == nil || !rot.Active[1].ExpiresAt.Equal(testNow.Add(api.DefaultSigningOverlap)) || rot.Active[0].ExpiresAt != nil {
		t.Fatalf("rotate: %+v", rot)
	}
	var after api.SigningSecret
	e.doJSON(t, "GET", "/api/v1/apps/billing/signing-secret", nil, http.StatusOK, &after)
	if after.Secret != rot.Secret || len(after.Active) != 2 {
		t.Fatalf("GET after rotate: %+v", after)
	}
	entries, _, err := e.store.ListAudit(t.Context(), store.AuditFilter{Target: "billing"})
	if err != nil || len(entries) != 1 || entries[0].Action != "secret.rotate" || entries[0].App != "billing" {
		t.Fatalf("audit: %v, %v", entries, err)
	}
	if strings.Contains(entries[0].Detail, rot.Secret) {
		t.Fatal("the audit log holds the secret")
	}

	// An overlap of 0s stops the old secrets at once.
	var now0 api.SigningSecret
	e.doJSON(t, "POST", "/api/v1/apps/billing/signing-secret/rotate", map[string]any{"overlap": "0s"}, http.StatusCreated, &now0)
	if now0.Version != 3 || len(now0.Active) != 1 {
		t.Fatalf("rotate with overlap 0s: %+v", now0)
	}

	for _, tc := range []struct {
		method, path string
		body         any
		field        string
	}{
		{"GET", "/api/v1/apps/bad%20app/signing-secret", nil, "app"},
		{"POST", "/api/v1/apps/bad%20app/signing-secret/rotate", nil, "app"},
		{"GET", "/api/v1/apps/" + strings.Repeat("a", 101) + "/signing-secret", nil, "app"},
		{"POST", "/api/v1/apps/billing/signing-secret/rotate", map[string]any{"overlap": "-1h"}, "overlap"},
		{"POST", "/api/v1/apps/billing/signing-secret/rotate", map[string]any{"overlap": "soon"}, "overlap"},
		{"POST", "/api/v1/apps/billing/signing-secret/rotate", map[string]any{"other": 1}, "other"},
	} {
		code, b := e.do(t, tc.method, tc.path, tc.body)
		assertError(t, code, b, http.StatusBadRequest, tc.field, "")
	}
}

// authDo sends a request with a bearer token.
func (e *env) authDo(t *testing.T, token, method, path string, body any) (int, []byte) {
	t.Helper()
	code, _, b := testenv.Call(t, e.srv.Client(), method, e.srv.URL+path, token, body)
	return code, b
}

func TestSigningSecretAccess(t *testing.T) {
	t.Parallel()
	const admin = "admin-token-for-tests"
	e := newEnv(t, func(c *api.Config) { c.AdminToken = admin })
	token := func(name, role string, apps ...string) string {
		code, b := e.authDo(t, admin, "POST", "/api/v1/tokens", api.TokenRequest{Name: name, Role: role, Apps: apps})
		var tok api.Token
		if code != http.StatusCreated || json.Unmarshal(b, &tok) != nil || tok.Token == "" {
			t.Fatalf("create token %s: %d %s", name, code, b)
		}
		return tok.Token
	}
	read := token("reader", model.RoleRead)
	readScoped := token("billing reader", model.RoleRead, "billing")
	otherWrite := token("other writer", model.RoleWrite, "other")
	billingWrite := token("billing writer", model.RoleWrite, "billing")
	write := token("writer", model.RoleWrite)
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"bad token", "chm_nope", http.StatusUnauthorized},
		{"read token", read, http.StatusForbidden},
		{"read token of the app", readScoped, http.StatusForbidden},
		{"write token of another app", otherWrite, http.StatusForbidden},
		{"write token of the app", billingWrite, 0},
		{"write token", write, 0},
		{"admin", admin, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []struct {
				method, path string
				ok           int
			}{
				{"GET", "/api/v1/apps/billing/signing-secret", http.StatusOK},
				{"POST", "/api/v1/apps/billing/signing-secret/rotate", http.StatusCreated},
			} {
				want := tc.want
				if want == 0 {
					want = r.ok
				}
				if code, b := e.authDo(t, tc.token, r.method, r.path, nil); code != want {
					t.Fatalf("%s %s: %d %s, want %d", r.method, r.path, code, b, want)
				}
			}
		})
	}
	entries, _, err := e.store.ListAudit(t.Context(), store.AuditFilter{Target: "billing"})
	if err != nil || len(entries) != 3 {
		t.Fatalf("audit: %d entries, %v", len(entries), err)
	}
	if entries[0].TokenName != "admin" || entries[2].TokenName != "billing writer" {
		t.Fatalf("audit names: %s, %s", entries[0].TokenName, entries[2].TokenName)
	}
}

// TestSignedCallback: the sender signs a timer's callbacks with its app's
// secret, which a receiver gets from the API and verifies with; after a
// rotation, the callbacks carry both secrets' signatures for the overlap,
// so a receiver holding either verifies.
func TestSignedCallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	type delivery struct {
		h    http.Header
		body []byte
	}
	got := make(chan delivery, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), b}
	}))
	defer recv.Close()
	tm := e.createTimer(t, map[string]any{"app": "billing", "name": "signed", "schedule": "@every 1m",
		"action": map[string]any{"type": "http", "http": map[string]any{"url": recv.URL + "/hook", "body": `{"invoice": 42}`}}})
	m, err := e.store.GetTimer(t.Context(), tm.ID)
	if err != nil {
		t.Fatal(err)
	}
	var sec api.SigningSecret
	e.doJSON(t, "GET", "/api/v1/apps/billing/signing-secret", nil, http.StatusOK, &sec)

	send := func(runID string) delivery {
		t.Helper()
		// A fresh sender each time, as a node started after the rotation;
		// its clock is the API's, by which the secrets expire.
		r := action.NewHTTPRunnerWith(action.HTTPOptions{
			Secrets: action.NewSecretCache(e.store, action.SecretCacheOptions{Clock: clock.Func(func() time.Time { return testNow.Add(time.Minute) })}),
		})
		run := &model.Run{ID: runID, TimerID: m.ID, Attempt: 1, Node: "n1", ScheduledAt: testNow}
		if _, err := r.Run(t.Context(), run, m); err != nil {
			t.Fatalf("callback: %v", err)
		}
		return <-got
	}

	d := send("run_1")
	if d.h.Get("webhook-id") != "run_1" || d.h.Get("X-Chime-Run-ID") != "run_1" || string(d.body) != `{"invoice": 42}` {
		t.Fatalf("delivery: %v %s", d.h, d.body)
	}
	if err := webhook.Verify(sec.Secret, d.h, d.body); err != nil {
		t.Fatalf("verify with the API's secret: %v", err)
	}
	if err := webhook.Verify(webhook.NewSecret(), d.h, d.body); err == nil {
		t.Fatal("another secret verified")
	}

	var rot api.SigningSecret
	e.doJSON(t, "POST", "/api/v1/apps/billing/signing-secret/rotate", nil, http.StatusCreated, &rot)
	d = send("run_2")
	if n := len(strings.Fields(d.h.Get("webhook-signature"))); n != 2 {
		t.Fatalf("%d signatures during the overlap, want 2", n)
	}
	for _, s := range []string{sec.Secret, rot.Secret} {
		if err := webhook.Verify(s, d.h, d.body); err != nil {
			t.Fatalf("verify during the overlap: %v", err)
		}
	}
}

// TestRotationSignsAtOnce: the node that rotates an app's signing secret
// signs its next callback with every active secret, though its cache of
// the secrets was read just before and its clock has not moved.
func TestRotationSignsAtOnce(t *testing.T) {
	t.Parallel()
	var cache *action.SecretCache
	e := newEnv(t, func(c *api.Config) {
		cache = action.NewSecretCache(c.Store, action.SecretCacheOptions{Clock: clock.Func(func() time.Time { return testNow.Add(time.Minute) })})
		c.RotatingSecrets = cache.Rotating
	})
	var sec api.SigningSecret
	e.doJSON(t, "GET", "/api/v1/apps/billing/signing-secret", nil, http.StatusOK, &sec)
	if got, err := cache.SigningSecrets(t.Context(), "billing"); err != nil || len(got) != 1 || got[0] != sec.Secret {
		t.Fatalf("before the rotation: %v, %v", got, err)
	}
	var rot api.SigningSecret
	e.doJSON(t, "POST", "/api/v1/apps/billing/signing-secret/rotate", nil, http.StatusCreated, &rot)
	got, err := cache.SigningSecrets(t.Context(), "billing")
	if err != nil || !slices.Equal(got, []string{rot.Secret, sec.Secret}) {
		t.Fatalf("right after the rotation: %v, %v, want the new and the old secret", got, err)
	}
}
