package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/internal/app/api"
	"github.com/chimehq/chime/internal/app/server"
)

const testAdmin = "cli-admin-token-0123456789"

// TestTokenCommands: token create, list and revoke, --token and
// CHIME_TOKEN on a client command, and the audit log.
func TestTokenCommands(t *testing.T) {
	srv := apiServer(t, func(c *api.Config) { c.AdminToken = testAdmin })

	r := chime(t, srv, "", "timer", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "HTTP 401") || !strings.Contains(r.stderr, "--token") {
		t.Fatalf("without a token: %+v", r)
	}
	r = chime(t, srv, "", "token", "create", "--name", "ci", "--role", "write", "--app", "demo", "--token", testAdmin)
	if r.code != 0 {
		t.Fatalf("token create: %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	secret := lines[len(lines)-1]
	if !strings.HasPrefix(secret, "chm_") || !strings.Contains(r.stdout, "apps: demo") {
		t.Fatalf("token create printed %q", r.stdout)
	}
	id := strings.Fields(lines[0])[2]

	r = chime(t, srv, "", append(createArgs("t1"), "--token", secret)...)
	if r.code != 0 {
		t.Fatalf("create with --token: %+v", r)
	}
	t.Setenv(EnvToken, secret)
	if r = chime(t, srv, "", "timer", "list"); r.code != 0 || !strings.Contains(r.stdout, "t1") {
		t.Fatalf("list with %s: %+v", EnvToken, r)
	}
	if r = chime(t, srv, "", "token", "list"); r.code != 1 || !strings.Contains(r.stderr, "HTTP 403") {
		t.Fatalf("token list with a write token: %+v", r)
	}
	t.Setenv(EnvToken, testAdmin)
	r = chime(t, srv, "", "token", "list")
	if r.code != 0 || !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, "write") || strings.Contains(r.stdout, secret) {
		t.Fatalf("token list: %+v", r)
	}
	if r = chime(t, srv, "", "token", "revoke", id); r.code != 0 || !strings.Contains(r.stdout, "revoked token "+id) {
		t.Fatalf("token revoke: %+v", r)
	}
	if r = chime(t, srv, "", "timer", "list", "--token", secret); r.code != 1 || !strings.Contains(r.stderr, "HTTP 401") {
		t.Fatalf("revoked token: %+v", r)
	}
	r = chime(t, srv, "", "audit")
	for _, want := range []string{"token.revoke", "timer.create", "token.create", "ci"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("audit lacks %q: %+v", want, r)
		}
	}
	if r = chime(t, srv, "", "audit", "-o", "json", "--limit", "1"); r.code != 0 || !strings.Contains(r.stdout, `"next_cursor"`) {
		t.Errorf("audit -o json: %+v", r)
	}
	if r = chime(t, srv, "", "token", "create", "--role", "read"); r.code != 2 {
		t.Errorf("token create without --name: %+v", r)
	}
}

// TestTokenTTL: token create --ttl gives the token an expiry, printed, and
// token list shows it and the token's last use.
func TestTokenTTL(t *testing.T) {
	srv := apiServer(t, func(c *api.Config) { c.AdminToken = testAdmin })
	r := chime(t, srv, "", "token", "create", "--name", "temp", "--role", "read", "--ttl", "720h", "--token", testAdmin)
	if r.code != 0 || strings.Contains(r.stdout, "expires: never") || !strings.Contains(r.stdout, "expires: ") {
		t.Fatalf("token create --ttl: %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	secret, id := lines[len(lines)-1], strings.Fields(lines[0])[2]
	if r = chime(t, srv, "", "timer", "list", "--token", secret); r.code != 0 {
		t.Fatalf("timer list with the new token: %+v", r)
	}
	r = chime(t, srv, "", "token", "list", "--token", testAdmin)
	if r.code != 0 || !strings.Contains(r.stdout, "EXPIRES") || !strings.Contains(r.stdout, "LAST USED") {
		t.Fatalf("token list: %+v", r)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, id) && (strings.Count(line, "T") < 3 || strings.HasSuffix(strings.TrimSpace(line), "-")) {
			t.Errorf("token list row %q: want created, expiry and last use times", line)
		}
	}
	for _, bad := range [][]string{{"--ttl", "soon"}, {"--ttl", "1h", "--expires-at", "2030-01-01T00:00:00Z"}, {"--expires-at", "tomorrow"}} {
		if r = chime(t, srv, "", append([]string{"token", "create", "--name", "x", "--role", "read", "--token", testAdmin}, bad...)...); r.code != 2 {
			t.Errorf("token create %v: %+v, want exit 2", bad, r)
		}
	}
}

// TestServeRefusesOpenAPI: chime serve exits 2, saying why, on a
// non-loopback address without authentication and with auth on but no
// way in.
func TestServeRefusesOpenAPI(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"all interfaces, no token", []string{"--listen", "0.0.0.0:0"}, "refusing to serve"},
		{"auth off on all interfaces", []string{"--listen", "0.0.0.0:0", "--auth", "off"}, "--insecure-no-auth"},
		{"auth on, nobody can log in", []string{"--listen", "127.0.0.1:0", "--auth", "on"}, "nobody could get in"},
		{"short admin token", []string{"--listen", "127.0.0.1:0", "--admin-token", "short"}, "at least 16"},
		{"half a TLS pair", []string{"--listen", "127.0.0.1:0", "--tls-cert", "x.pem"}, "go together"},
		{"bad auth mode", []string{"--auth", "maybe"}, "--auth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var out, errb bytes.Buffer
			args := append([]string{"serve", "--data-dir", dir, "--log-level", "error"}, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			code := Main(ctx, args, &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errb.String(), tc.want)
			}
		})
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their paths.
func writeCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chime test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// TestTLS: --tls-cert and --tls-key serve HTTPS with HTTP/2, and the CLI
// trusts the private CA given by --ca-cert (and only then).
func TestTLS(t *testing.T) {
	certFile, keyFile := writeCert(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{
			Listen: "127.0.0.1:0", DataDir: dir, DB: "sqlite://" + filepath.Join(dir, "chime.db"),
			TLSCert: certFile, TLSKey: keyFile, AdminToken: testAdmin, ShutdownTimeout: 5 * time.Second,
			Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
			Started: func(a, _ string) { addr <- a },
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var base string
	select {
	case a := <-addr:
		base = "https://" + a
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("server did not start")
	}

	pemBytes, _ := os.ReadFile(certFile)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	res, err := hc.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 2 || res.Header.Get("Strict-Transport-Security") == "" {
		t.Errorf("proto %s, HSTS %q: want HTTP/2 and HSTS", res.Proto, res.Header.Get("Strict-Transport-Security"))
	}

	if r := chime(t, base, "", "timer", "list", "--token", testAdmin, "--ca-cert", certFile); r.code != 0 {
		t.Errorf("with --ca-cert: %+v", r)
	}
	t.Setenv(EnvCACert, certFile)
	if r := chime(t, base, "", "timer", "list", "--token", testAdmin); r.code != 0 {
		t.Errorf("with %s: %+v", EnvCACert, r)
	}
	t.Setenv(EnvCACert, "")
	if r := chime(t, base, "", "timer", "list", "--token", testAdmin); r.code != 1 || !strings.Contains(r.stderr, "certificate") {
		t.Errorf("without the CA: %+v", r)
	}
	if r := chime(t, base, "", "timer", "list", "--ca-cert", filepath.Join(dir, "missing.pem")); r.code != 2 {
		t.Errorf("missing CA file: %+v", r)
	}
}
