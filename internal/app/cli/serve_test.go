package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	chimelib "github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/app/server"
	"github.com/chimehq/chime/internal/engine/retention"
)

// serveConfig parses args (with yaml, when not empty, as the --config
// file) the way chime serve does, environment included, and returns the
// node's configuration or the error of the flags or of the config.
func serveConfig(t *testing.T, args []string, yaml string) (server.Config, error) {
	t.Helper()
	if yaml != "" {
		file := filepath.Join(t.TempDir(), "chime.yaml")
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(slices.Clone(args), "--config", file)
	}
	var o nodeOptions
	cmd := &cobra.Command{Use: "serve", RunE: func(*cobra.Command, []string) error { return nil }}
	addNodeFlags(cmd, &o)
	if err := cmd.ParseFlags(args); err != nil {
		return server.Config{}, err
	}
	return o.config(cmd)
}

// flagCase parses one case of a flag's table test as serveConfig does,
// with env, when not empty, as the flag's environment variable. With
// wantErr it checks that the error names it and reports false; otherwise
// it fails on any error.
func flagCase(t *testing.T, flag string, args []string, env, yaml, wantErr string) (server.Config, bool) {
	t.Helper()
	if env != "" {
		t.Setenv(EnvName(flag), env)
	}
	cfg, err := serveConfig(t, args, yaml)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error = %v, want one naming %s", err, wantErr)
		}
		return cfg, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return cfg, true
}

// TestSQLiteSynchronousFlag: --sqlite-synchronous, CHIME_SQLITE_SYNCHRONOUS
// and the YAML key sqlite-synchronous set server.Config.SQLiteSynchronous;
// full is the default; a bad value is an error that names the flag.
func TestSQLiteSynchronousFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     string // CHIME_SQLITE_SYNCHRONOUS, unset when empty
		yaml    string // config file body, none when empty
		want    string
		wantErr string
	}{
		{name: "default", want: "full"},
		{name: "flag", args: []string{"--sqlite-synchronous", "normal"}, want: "normal"},
		{name: "flag upper case", args: []string{"--sqlite-synchronous=FULL"}, want: "full"},
		{name: "env", env: "normal", want: "normal"},
		{name: "yaml", yaml: "sqlite-synchronous: normal\n", want: "normal"},
		{name: "flag beats env", args: []string{"--sqlite-synchronous=full"}, env: "normal", want: "full"},
		{name: "bad flag", args: []string{"--sqlite-synchronous=off"}, wantErr: "--sqlite-synchronous"},
		{name: "bad env", env: "extra", wantErr: "--sqlite-synchronous"},
		{name: "bad yaml", yaml: "sqlite-synchronous: off\n", wantErr: "sqlite-synchronous"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := flagCase(t, "sqlite-synchronous", tc.args, tc.env, tc.yaml, tc.wantErr)
			if !ok {
				return
			}
			if got := cfg.SQLiteSynchronous; got != tc.want {
				t.Errorf("SQLiteSynchronous = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestHistoryFlags: --history-keep and --history-max-age (and their
// environment variables and YAML keys) default to chime's constants; 0
// means no limit, which server.Config spells negative; a negative value is
// a usage error.
func TestHistoryFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      string // CHIME_HISTORY_MAX_AGE, unset when empty
		yaml     string
		keep     int
		maxAge   time.Duration
		wantCode int // exit code of the error, 0 for none
	}{
		{name: "default", keep: retention.DefaultKeep, maxAge: retention.DefaultMaxAge},
		{name: "flags", args: []string{"--history-keep", "50", "--history-max-age", "48h"}, keep: 50, maxAge: 48 * time.Hour},
		{name: "env and yaml", env: "2h", yaml: "history-keep: 7\n", keep: 7, maxAge: 2 * time.Hour},
		{name: "zero is no limit", args: []string{"--history-keep=0", "--history-max-age=0s"}, keep: -1, maxAge: -1},
		{name: "negative", args: []string{"--history-keep=-3"}, wantCode: 2},
		{name: "negative env", env: "-1h", wantCode: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(EnvName("history-max-age"), tc.env)
			}
			cfg, err := serveConfig(t, tc.args, tc.yaml)
			if tc.wantCode != 0 {
				var ee *ExitError
				if !errors.As(err, &ee) || ee.Code != tc.wantCode || !strings.Contains(err.Error(), "--history-") {
					t.Fatalf("error = %v, want exit %d naming the flag", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.HistoryKeep != tc.keep || cfg.HistoryMaxAge != tc.maxAge {
				t.Errorf("HistoryKeep, HistoryMaxAge = %d, %v; want %d, %v", cfg.HistoryKeep, cfg.HistoryMaxAge, tc.keep, tc.maxAge)
			}
		})
	}
}

// TestSecretsFlags: --secret-key (value, @file, env, YAML) is decoded into
// server.Config.SecretKey and a bad one is an error naming the flag;
// --cleanup-root and --shell-allow take several values.
func TestSecretsFlags(t *testing.T) {
	key := strings.Repeat("k", 32)
	b64 := base64.StdEncoding.EncodeToString([]byte(key))
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(b64+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		yaml      string
		wantKey   string
		wantRoots []string
		wantAllow []string
		wantErr   string
	}{
		{name: "none"},
		{name: "flag", args: []string{"--secret-key", b64}, wantKey: key},
		{name: "file", args: []string{"--secret-key=@" + keyFile}, wantKey: key},
		{name: "env", env: map[string]string{"CHIME_SECRET_KEY": " " + b64 + " "}, wantKey: key},
		{name: "yaml", yaml: "secret-key: \"@" + keyFile + "\"\n", wantKey: key},
		{name: "not base64", args: []string{"--secret-key", "not a key"}, wantErr: "--secret-key: not base64"},
		{name: "short", args: []string{"--secret-key", base64.StdEncoding.EncodeToString([]byte("short"))}, wantErr: "--secret-key: the key is 5 bytes"},
		{name: "bad env", env: map[string]string{"CHIME_SECRET_KEY": "@/nonexistent/key"}, wantErr: "--secret-key: read key file"},
		{name: "roots", args: []string{"--cleanup-root", "/a", "--cleanup-root=/b"}, wantRoots: []string{"/a", "/b"}},
		{name: "roots env", env: map[string]string{"CHIME_CLEANUP_ROOT": "/a,/b"}, wantRoots: []string{"/a", "/b"}},
		{name: "roots yaml", yaml: "cleanup-root: [/a, /b]\n", wantRoots: []string{"/a", "/b"}},
		{name: "shell allow", args: []string{"--allow-shell", "--shell-allow", "tar", "--shell-allow", "pg_dump"}, wantAllow: []string{"tar", "pg_dump"}},
		{name: "shell allow without allow-shell", args: []string{"--shell-allow", "tar"}, wantErr: "--allow-shell"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := serveConfig(t, tc.args, tc.yaml)
			if tc.wantErr != "" {
				var ee *ExitError
				if !errors.As(err, &ee) || ee.Code != 2 || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want exit 2 with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(cfg.SecretKey) != tc.wantKey || !slices.Equal(cfg.CleanupRoots, tc.wantRoots) || !slices.Equal(cfg.ShellAllow, tc.wantAllow) {
				t.Errorf("key %q roots %q allow %q", cfg.SecretKey, cfg.CleanupRoots, cfg.ShellAllow)
			}
		})
	}
	// The whole command exits 2.
	var stderr strings.Builder
	if code := Main(t.Context(), []string{"serve", "--secret-key", "nope", "--data-dir", t.TempDir()}, io.Discard, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "--secret-key") {
		t.Errorf("chime serve with a bad key: exit %d, %s", code, stderr.String())
	}
}

// TestCallbackFlags: --callback-deny and --callback-allow take CIDRs,
// repeated or comma-separated, from the command line, the environment or
// the YAML file (a list or a string); a bad entry names the flag.
func TestCallbackFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     string // CHIME_CALLBACK_DENY
		yaml    string
		deny    []string
		allow   []string
		overlap string
		wantErr string
	}{
		{name: "default", overlap: "24h0m0s"},
		{name: "flags", args: []string{"--callback-deny", "127.0.0.0/8,::1/128", "--callback-deny", "10.0.0.0/8", "--callback-allow", "169.254.169.254", "--signing-overlap", "1h"},
			deny: []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8"}, allow: []string{"169.254.169.254"}, overlap: "1h0m0s"},
		{name: "env", env: "127.0.0.0/8, 10.0.0.0/8", deny: []string{"127.0.0.0/8", "10.0.0.0/8"}, overlap: "24h0m0s"},
		{name: "yaml list", yaml: "callback-deny:\n  - 127.0.0.0/8\n  - 192.168.0.0/16\ncallback-allow: 192.168.1.0/24\n",
			deny: []string{"127.0.0.0/8", "192.168.0.0/16"}, allow: []string{"192.168.1.0/24"}, overlap: "24h0m0s"},
		{name: "flag beats env", args: []string{"--callback-deny=fc00::/7"}, env: "10.0.0.0/8", deny: []string{"fc00::/7"}, overlap: "24h0m0s"},
		{name: "bad flag", args: []string{"--callback-deny", "10.0.0.0/33"}, wantErr: "--callback-deny"},
		{name: "bad env", env: "example.com", wantErr: "--callback-deny"},
		{name: "bad yaml", yaml: "callback-allow: [nope]\n", wantErr: "callback-allow"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := flagCase(t, "callback-deny", tc.args, tc.env, tc.yaml, tc.wantErr)
			if !ok {
				return
			}
			if !slices.Equal(cfg.CallbackDeny, tc.deny) || !slices.Equal(cfg.CallbackAllow, tc.allow) || cfg.SigningOverlap.String() != tc.overlap {
				t.Errorf("deny %q allow %q overlap %s; want %q %q %s", cfg.CallbackDeny, cfg.CallbackAllow, cfg.SigningOverlap, tc.deny, tc.allow, tc.overlap)
			}
		})
	}
}

// TestDaemonArgsCallbackFlags: the daemon gets each CIDR as given, and
// parses them back to the same lists.
func TestDaemonArgsCallbackFlags(t *testing.T) {
	var o nodeOptions
	cmd := &cobra.Command{Use: "start"}
	addNodeFlags(cmd, &o)
	if err := cmd.ParseFlags([]string{"--callback-deny", "127.0.0.0/8,::1/128", "--callback-deny", "10.0.0.0/8", "--callback-allow", "10.1.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	args, _ := daemonArgs(cmd.Flags())
	want := []string{"cron", "start", "--callback-allow=10.1.0.0/16", "--callback-deny=127.0.0.0/8", "--callback-deny=::1/128", "--callback-deny=10.0.0.0/8"}
	if !slices.Equal(args, want) {
		t.Fatalf("args %q, want %q", args, want)
	}
	var o2 nodeOptions
	cmd2 := &cobra.Command{Use: "start"}
	addNodeFlags(cmd2, &o2)
	if err := cmd2.ParseFlags(args[2:]); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o2.cfg.CallbackDeny, o.cfg.CallbackDeny) || !slices.Equal(o2.cfg.CallbackAllow, o.cfg.CallbackAllow) {
		t.Fatalf("re-parsed %q %q, want %q %q", o2.cfg.CallbackDeny, o2.cfg.CallbackAllow, o.cfg.CallbackDeny, o.cfg.CallbackAllow)
	}
}

// TestLazyClaimsFlagRemoved: --lazy-claims in any form (the flag alone,
// with a value, CHIME_LAZY_CLAIMS, the config key) is refused with a
// message that says it was removed and that claims are always written,
// and a node given it exits 2.
func TestLazyClaimsFlagRemoved(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  string
		yaml string
	}{
		{name: "flag alone", args: []string{"--lazy-claims"}},
		{name: "flag true", args: []string{"--lazy-claims=true"}},
		{name: "flag false", args: []string{"--lazy-claims=false"}},
		{name: "flag auto", args: []string{"--lazy-claims", "auto"}},
		{name: "env", env: "false"},
		{name: "yaml", yaml: "lazy-claims: auto\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			flagCase(t, "lazy-claims", tc.args, tc.env, tc.yaml, "--lazy-claims was removed: every run is claimed with a conditional write")
		})
	}
	t.Run("exit 2", func(t *testing.T) {
		for _, args := range [][]string{{"serve", "--lazy-claims=false"}, {"cron", "start", "--lazy-claims"}} {
			out, code := runCLI(t, args...)
			if code != 2 || !strings.Contains(out, "--lazy-claims was removed") {
				t.Errorf("chime %q: exit %d, output %q; want 2 and a message saying it was removed", args, code, out)
			}
		}
	})
}

// TestCoordinationFlag: --coordination, CHIME_COORDINATION and the YAML key
// coordination set server.Config.Coordination; auto is the default; a bad
// value names the flag.
func TestCoordinationFlag(t *testing.T) {
	tests := []struct {
		name, env, yaml, want, wantErr string
		args                           []string
	}{
		{name: "default", want: "auto"},
		{name: "flag", args: []string{"--coordination", "db"}, want: "db"},
		{name: "env", env: "redis", want: "redis"},
		{name: "yaml", yaml: "coordination: db\n", want: "db"},
		{name: "bad flag", args: []string{"--coordination=raft"}, wantErr: "--coordination"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := flagCase(t, "coordination", tc.args, tc.env, tc.yaml, tc.wantErr)
			if ok && cfg.Coordination != tc.want {
				t.Errorf("Coordination = %q, want %q", cfg.Coordination, tc.want)
			}
		})
	}
}

// TestServeCoordinationErrors: a coordination that contradicts the other
// flags, or the live nodes of the store, stops chime serve with exit 2 and
// a message naming the flag or the nodes.
func TestServeCoordinationErrors(t *testing.T) {
	t.Parallel()
	serve := func(t *testing.T, dir string, args ...string) (int, string) {
		var out bytes.Buffer
		args = append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir, "--log-level", "error"}, args...)
		code := Main(context.Background(), args, &out, &out)
		return code, out.String()
	}
	t.Run("redis without --redis", func(t *testing.T) {
		t.Parallel()
		code, out := serve(t, t.TempDir(), "--coordination", "redis")
		if code != 2 || !strings.Contains(out, "--redis") {
			t.Errorf("exit %d, %q; want 2 naming --redis", code, out)
		}
	})
	t.Run("db with --redis", func(t *testing.T) {
		t.Parallel()
		code, out := serve(t, t.TempDir(), "--coordination", "db", "--redis", "redis://127.0.0.1:1/0")
		if code != 2 || !strings.Contains(out, "--redis") {
			t.Errorf("exit %d, %q; want 2 naming --redis", code, out)
		}
	})
	t.Run("a live node runs another mode", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		db := "sqlite://" + filepath.Join(dir, "shared.db")
		n, err := chimelib.New(chimelib.Config{
			DB:      db,
			DataDir: filepath.Join(dir, "a"),
			Logger:  slog.New(slog.DiscardHandler),
			Cluster: chimelib.ClusterConfig{
				NodeID:       "node-a",
				Coordination: "db",
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer n.Shutdown(context.Background())
		code, out := serve(t, filepath.Join(dir, "b"), "--db", db, "--node-id", "node-b")
		if code != 2 || !strings.Contains(out, "node-a") || !strings.Contains(out, "--coordination db") || !strings.Contains(out, "local") {
			t.Errorf("exit %d, %q; want 2 naming node-a, its mode db and this node's local", code, out)
		}
	})
}
