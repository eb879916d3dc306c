package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/webhook"
)

// startEcho runs chime echo with args on a free port until the test ends
// and returns its URL and its output.
func startEcho(t *testing.T, args ...string) (string, *testenv.SyncBuffer) {
	t.Helper()
	out := &testenv.SyncBuffer{}
	root := NewRootCmd()
	root.SetArgs(append([]string{"echo", "--listen", "127.0.0.1:0"}, args...))
	root.SetOut(out)
	root.SetErr(out)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("chime echo: %v", err)
		}
	})
	re := regexp.MustCompile(`listening on (http://\S+/)`)
	var url string
	ok, why := testenv.Poll(10*time.Second, func() (bool, string) {
		m := re.FindStringSubmatch(out.String())
		if m == nil {
			return false, out.String()
		}
		url = m[1]
		return true, ""
	})
	if !ok {
		t.Fatalf("chime echo did not listen: %s", why)
	}
	return url, out
}

// TestEcho: chime echo answers 200 to every method, prints the method,
// path, X-Chime-* headers and body of each callback, and checks the
// signature with --secret or with --app's secrets read from the server.
func TestEcho(t *testing.T) {
	t.Parallel()
	srv := apiServer(t)
	var ss api.SigningSecret
	r := chime(t, srv, "", "app", "secret", "--app", "demo", "-o", "json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ss) != nil {
		t.Fatalf("app secret: %+v", r)
	}
	other := webhook.NewSecret()
	body := `{"hello":"chime"}`
	send := func(t *testing.T, url, method string, signWith string) {
		t.Helper()
		req, err := http.NewRequest(method, url+"ping?x=1", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Chime-Run-ID", "run1")
		req.Header.Set("X-Chime-Attempt", "1")
		req.Header.Set("Content-Type", "application/json")
		if signWith != "" {
			if err := webhook.SetHeaders(req.Header, []string{signWith}, "run1", time.Now(), []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d, want 200", method, resp.StatusCode)
		}
	}
	tests := []struct {
		name     string
		args     []string
		method   string
		signWith string
		want     string
	}{
		{"secret ok", []string{"--secret", ss.Secret}, "POST", ss.Secret, "signature ok"},
		{"secret wrong", []string{"--secret", ss.Secret}, "POST", other, "signature NOT ok: no matching signature"},
		{"unsigned", []string{"--secret", ss.Secret}, "GET", "", "signature NOT ok: missing webhook-id"},
		{"app ok", []string{"--app", "demo", "--server", srv}, "PUT", ss.Secret, "signature ok"},
		{"app wrong", []string{"--app", "demo", "--server", srv}, "DELETE", other, "signature NOT ok: no matching signature"},
		{"not checked", nil, "PATCH", ss.Secret, "signature not checked: give --secret or --app"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, out := startEcho(t, tc.args...)
			send(t, url, tc.method, tc.signWith)
			ok, why := testenv.Poll(10*time.Second, func() (bool, string) {
				return strings.Contains(out.String(), tc.want), out.String()
			})
			if !ok {
				t.Fatalf("output does not say %q:\n%s", tc.want, why)
			}
			for _, want := range []string{tc.method + " /ping?x=1\n", "X-Chime-Run-Id: run1\n", "X-Chime-Attempt: 1\n", "body: " + body + "\n"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output does not say %q:\n%s", want, out.String())
				}
			}
			if strings.Contains(out.String(), "Content-Type") {
				t.Errorf("output shows a header that is not X-Chime-*:\n%s", out.String())
			}
		})
	}
	t.Run("bad flags", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{{"--secret", "whsec_!!"}, {"--secret", ss.Secret, "--app", "demo"}} {
			r := chime(t, srv, "", append([]string{"echo", "--listen", "127.0.0.1:0"}, args...)...)
			if r.code != 2 {
				t.Errorf("echo %v: %+v, want exit 2", args, r)
			}
		}
	})
}
