package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/base/testenv"
)

// TestHealthcheck: chime healthcheck exits 0 on a 200 from /readyz and 1
// on anything else, saying why on stderr; a bad flag is a usage error.
func TestHealthcheck(t *testing.T) {
	t.Parallel()
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" && r.URL.Path != "/chime/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"status":"ready"}`))
	}))
	defer ready.Close()
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":{"message":"not ready: clock skew 3s"}}`))
	}))
	defer notReady.Close()
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	// A port nothing listens on: one that was just closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string // in the output
	}{
		{"ready", []string{"--url", ready.URL}, 0, "ready"},
		{"ready, trailing slash", []string{"--url", ready.URL + "/"}, 0, "ready"},
		{"ready under a path", []string{"--url", ready.URL + "/chime"}, 0, "ready"},
		{"503", []string{"--url", notReady.URL}, 1, "HTTP 503"},
		{"503 says why", []string{"--url", notReady.URL}, 1, "clock skew 3s"},
		{"refused", []string{"--url", closed}, 1, "connection refused"},
		{"timeout", []string{"--url", slow.URL, "--timeout", "200ms"}, 1, "did not answer in time"},
		{"not a URL", []string{"--url", "127.0.0.1:8080"}, 2, "not an http or https URL"},
		{"bad timeout", []string{"--url", ready.URL, "--timeout", "0s"}, 2, "--timeout must be positive"},
		{"bad flag", []string{"--nope"}, 2, "unknown flag"},
		{"missing CA file", []string{"--url", ready.URL, "--ca-cert", "/nonexistent.pem"}, 2, "--ca-cert"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runCLI(t, append([]string{"healthcheck"}, tc.args...)...)
			if code != tc.wantCode || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want %d; output %q lacks %q", code, tc.wantCode, out, tc.want)
			}
		})
	}
}

// TestHealthcheckEnv: CHIME_URL sets --url, and --url beats it.
func TestHealthcheckEnv(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	t.Setenv(EnvName("url"), srv.URL)
	if out, code := runCLI(t, "healthcheck"); code != 0 {
		t.Errorf("CHIME_URL: exit %d: %s", code, out)
	}
	if out, code := runCLI(t, "healthcheck", "--url", "http://127.0.0.1:1"); code != 1 {
		t.Errorf("--url beats CHIME_URL: exit %d: %s", code, out)
	}
	t.Setenv(EnvName("timeout"), "soon")
	if out, code := runCLI(t, "healthcheck"); code != 2 || !strings.Contains(out, "CHIME_TIMEOUT") {
		t.Errorf("bad CHIME_TIMEOUT: exit %d: %s", code, out)
	}
}

// TestHealthcheckNode: chime healthcheck against a real node (SQLite, in
// this process) exits 0 once it serves.
func TestHealthcheckNode(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out bytes.Buffer
	go func() {
		done <- Main(ctx, []string{"cron", "start", "--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "error"}, &out, &out)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("node exit %d: %s", code, out.String())
		}
	}()
	var addr string
	testenv.Eventually(t, 20*time.Second, "the node's state file names its address", func() (bool, string) {
		st, err := readState(dir)
		addr = st.Addr
		return err == nil && addr != "", "no address yet"
	})
	if got, code := runCLI(t, "healthcheck", "--url", "http://"+addr); code != 0 || !strings.Contains(got, "ready") {
		t.Fatalf("healthcheck of a running node: exit %d: %s", code, got)
	}
}
