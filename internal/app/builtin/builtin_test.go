package builtin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/base/testenv"
	"github.com/chimehq/chime/model"
)

func runWith(args string) *chime.Run {
	return &chime.Run{Run: &model.Run{ID: "01RUN", Attempt: 1}, Timer: &model.Timer{}, Args: json.RawMessage(args)}
}

func TestCleanupValidate(t *testing.T) {
	bad := map[string]string{
		`{"dir": "/", "pattern": "*", "older_than": "1h"}`:           `dir "/" is refused`,
		`{"dir": "//", "pattern": "*", "older_than": "1h"}`:          `dir "/" is refused`,
		`{"dir": "tmp/x", "pattern": "*", "older_than": "1h"}`:       "absolute",
		`{"dir": "/tmp/../etc", "pattern": "*", "older_than": "1h"}`: "..",
		`{"dir": "/tmp/x", "pattern": "../*", "older_than": "1h"}`:   "path separator",
		`{"dir": "/tmp/x", "pattern": "a/b", "older_than": "1h"}`:    "path separator",
		`{"dir": "/tmp/x", "pattern": "[", "older_than": "1h"}`:      "syntax error",
		`{"dir": "/tmp/x", "pattern": "*", "older_than": "3 days"}`:  "not a Go duration",
		`{"dir": "/tmp/x", "pattern": "*", "older_than": "-1h"}`:     "positive",
		`{"dir": "/tmp/x", "pattern": "*"}`:                          "older_than is required",
		`{"dir": "/tmp/x", "pattern": "*", "older": "1h"}`:           "unknown field",
		`{"pattern": "*", "older_than": "1h"}`:                       "dir is required",
		`{"dir": "/tmp/x", "older_than": "1h"}`:                      "pattern is required",
		``:                                                           "args are required",
	}
	c := &CleanupFiles{Roots: []string{"/tmp"}}
	for args, want := range bad {
		err := c.ValidateArgs(json.RawMessage(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", args, err, want)
		}
	}
}

// TestCleanupRoots: a dir must resolve, symbolic links included, inside a
// root, at creation and again at every run.
func TestCleanupRoots(t *testing.T) {
	base := t.TempDir()
	mkdir := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	root := mkdir(filepath.Join(base, "root"))
	inside := mkdir(filepath.Join(root, "logs", "app"))
	outside := mkdir(filepath.Join(base, "outside"))
	// The second root is itself a symbolic link to a directory.
	root2real := mkdir(filepath.Join(base, "root2real"))
	root2 := filepath.Join(base, "root2")
	symlink := func(target, link string) string {
		t.Helper()
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		return link
	}
	symlink(root2real, root2)
	linkIn := symlink(inside, filepath.Join(root, "in-link"))
	linkOut := symlink(outside, filepath.Join(root, "out-link"))
	linkToRoot := symlink(root, filepath.Join(outside, "to-root"))

	c, err := NewCleanupFiles([]string{root, root2})
	if err != nil {
		t.Fatal(err)
	}
	args := func(dir string) json.RawMessage {
		b, _ := json.Marshal(CleanupArgs{Dir: dir, Pattern: "*.log", OlderThan: "1h"})
		return b
	}
	tests := []struct {
		name, dir, wantErr string
	}{
		{name: "the root itself", dir: root},
		{name: "inside", dir: inside},
		{name: "inside a root that is a link", dir: mkdir(filepath.Join(root2, "x"))},
		{name: "link to inside", dir: linkIn},
		{name: "link from outside to inside", dir: linkToRoot},
		{name: "outside", dir: outside, wantErr: "is not inside a --cleanup-root"},
		{name: "parent of root", dir: base, wantErr: "is not inside a --cleanup-root"},
		{name: "sibling with the root as prefix", dir: mkdir(root + "-other"), wantErr: "is not inside"},
		{name: "link to outside", dir: linkOut, wantErr: "resolves to"},
		{name: "missing", dir: filepath.Join(root, "missing"), wantErr: "does not resolve"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := c.ValidateArgs(args(tc.dir))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Run(context.Background(), runWith(string(args(tc.dir)))); err != nil {
					t.Fatalf("Run: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ValidateArgs: %v, want %q", err, tc.wantErr)
			}
			if _, err := c.Run(context.Background(), runWith(string(args(tc.dir)))); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Run: %v, want %q", err, tc.wantErr)
			}
		})
	}

	// A link that pointed inside at creation and outside at the run: the
	// run fails and the file outside stays.
	swap := symlink(inside, filepath.Join(root, "swap"))
	if err := c.ValidateArgs(args(swap)); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(outside, "victim.log")
	os.WriteFile(victim, []byte("x"), 0o644)
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(victim, old, old)
	os.Remove(swap)
	symlink(outside, swap)
	if _, err := c.Run(context.Background(), runWith(string(args(swap)))); err == nil || !strings.Contains(err.Error(), "not inside a --cleanup-root") {
		t.Fatalf("Run after the swap: %v", err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("file outside the roots removed: %v", err)
	}

	// No roots: nothing is allowed; bad roots are refused at startup.
	if err := (&CleanupFiles{}).ValidateArgs(args(inside)); err == nil || !strings.Contains(err.Error(), "no --cleanup-root") {
		t.Errorf("no roots: %v", err)
	}
	for _, roots := range [][]string{{"rel/dir"}, {"/"}, {filepath.Join(base, "missing")}, {victim}, {}} {
		if _, err := NewCleanupFiles(roots); err == nil {
			t.Errorf("NewCleanupFiles(%q) succeeded", roots)
		}
	}
}

func TestCleanupRun(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-48 * time.Hour)
	write := func(name string, mod time.Time) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldLog := write("a.log", old)
	newLog := write("b.log", time.Now())
	oldTxt := write("c.txt", old)
	if err := os.Mkdir(filepath.Join(dir, "d.log"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "target.log")
	os.WriteFile(outside, []byte("keep"), 0o644)
	os.Chtimes(outside, old, old)
	if err := os.Symlink(outside, filepath.Join(dir, "link.log")); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(CleanupArgs{Dir: dir, Pattern: "*.log", OlderThan: "24h"})
	out, err := (&CleanupFiles{Roots: []string{dir}}).Run(context.Background(), runWith(string(args)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "removed 1 files (4 bytes)") || !strings.Contains(string(out), oldLog) {
		t.Fatalf("output %q", out)
	}
	for _, p := range []string{newLog, oldTxt, outside, filepath.Join(dir, "d.log"), filepath.Join(dir, "link.log")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed", p)
		}
	}
	if _, err := os.Stat(oldLog); !os.IsNotExist(err) {
		t.Errorf("%s still there", oldLog)
	}
}

func TestSendEmailValidate(t *testing.T) {
	unconfigured := &SendEmail{}
	if err := unconfigured.ValidateArgs(json.RawMessage(`{"to": "a@b.c", "subject": "x"}`)); err == nil || !strings.Contains(err.Error(), "--smtp-host") {
		t.Fatalf("err %v", err)
	}
	s := &SendEmail{Config: SMTPConfig{Host: "localhost", From: "chime@example.com"}}
	bad := map[string]string{
		`{"to": "not an address", "subject": "x"}`:         "not an email address",
		`{"to": [], "subject": "x"}`:                       "to is required",
		`{"to": 5, "subject": "x"}`:                        "to must be",
		`{"to": "a@example.com"}`:                          "subject is required",
		`{"to": "a@example.com", "subject": "a\nb"}`:       "line break",
		`{"to": "a@example.com", "subject": "x", "cc": 1}`: "unknown field",
	}
	for args, want := range bad {
		if err := s.ValidateArgs(json.RawMessage(args)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", args, err, want)
		}
	}
	if err := s.ValidateArgs(json.RawMessage(`{"to": ["Ops <ops@example.com>", "b@example.com"], "subject": "hi", "body": "x"}`)); err != nil {
		t.Fatal(err)
	}
}

func TestSendEmailPlainAuth(t *testing.T) {
	srv := testenv.NewSMTPServer(t, nil)
	s := &SendEmail{Config: SMTPConfig{Host: "127.0.0.1", Port: srv.Port(), From: "Chime <chime@example.com>",
		Username: "user", Password: "pw"}}
	out, err := s.Run(context.Background(), runWith(`{"to": ["ops@example.com", "b@example.com"], "subject": "Nightly ✓", "body": "line 1\nline 2"}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `sent "Nightly ✓" to 2 recipients` {
		t.Fatalf("output %q", out)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := msgs[0]
	if m.Auth != "\x00user\x00pw" || !strings.HasPrefix(m.From, "MAIL FROM:<chime@example.com>") {
		t.Fatalf("auth %q from %q", m.Auth, m.From)
	}
	if len(m.To) != 2 || !strings.Contains(m.To[0], "ops@example.com") {
		t.Fatalf("rcpt %v", m.To)
	}
	for _, want := range []string{"Subject: =?utf-8?q?Nightly_=E2=9C=93?=", "Message-ID: <01RUN@example.com>", "line 1\r\nline 2", "To: <ops@example.com>, <b@example.com>"} {
		if !strings.Contains(m.Data, want) {
			t.Errorf("message lacks %q:\n%s", want, m.Data)
		}
	}
}

func TestSendEmailStartTLS(t *testing.T) {
	cert := selfSigned(t)
	srv := testenv.NewSMTPServer(t, &tls.Config{Certificates: []tls.Certificate{cert}})
	pool := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	pool.AddCert(leaf)
	s := &SendEmail{Config: SMTPConfig{Host: "127.0.0.1", Port: srv.Port(), From: "chime@example.com",
		Username: "u", Password: "p", StartTLS: true, TLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}}
	if _, err := s.Run(context.Background(), runWith(`{"to": "ops@example.com", "subject": "s", "body": "b"}`)); err != nil {
		t.Fatal(err)
	}
	msgs := srv.Messages()
	if len(msgs) != 1 || !msgs[0].TLS || msgs[0].Auth != "\x00u\x00p" {
		t.Fatalf("messages %+v", msgs)
	}
}

func TestSendEmailServerDown(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &SendEmail{Config: SMTPConfig{Host: "127.0.0.1", Port: port, From: "chime@example.com"}}
	_, err := s.Run(context.Background(), runWith(`{"to": "ops@example.com", "subject": "s"}`))
	if err == nil || !strings.Contains(err.Error(), "smtp") {
		t.Fatalf("err %v", err)
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
