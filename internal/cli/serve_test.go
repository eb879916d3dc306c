package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/chimehq/chime/internal/server"
)

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
			if tc.env != "" {
				t.Setenv(EnvName("sqlite-synchronous"), tc.env)
			}
			args := tc.args
			if tc.yaml != "" {
				file := filepath.Join(t.TempDir(), "chime.yaml")
				if err := os.WriteFile(file, []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", file)
			}
			var o nodeOptions
			cmd := &cobra.Command{Use: "serve", RunE: func(*cobra.Command, []string) error { return nil }}
			addNodeFlags(cmd, &o)
			err := cmd.ParseFlags(args)
			var got string
			if err == nil {
				cfg, cerr := o.config(cmd)
				err, got = cerr, cfg.SQLiteSynchronous
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("SQLiteSynchronous = %q, want %q", got, tc.want)
			}
		})
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
			if tc.env != "" {
				t.Setenv(EnvName("callback-deny"), tc.env)
			}
			args := tc.args
			if tc.yaml != "" {
				file := filepath.Join(t.TempDir(), "chime.yaml")
				if err := os.WriteFile(file, []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", file)
			}
			var o nodeOptions
			cmd := &cobra.Command{Use: "serve", RunE: func(*cobra.Command, []string) error { return nil }}
			addNodeFlags(cmd, &o)
			err := cmd.ParseFlags(args)
			var cfg server.Config
			if err == nil {
				cfg, err = o.config(cmd)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.CallbackDeny, tc.deny) || !slices.Equal(cfg.CallbackAllow, tc.allow) || cfg.SigningOverlap.String() != tc.overlap {
				t.Errorf("deny %q allow %q overlap %s; want %q %q %s", cfg.CallbackDeny, cfg.CallbackAllow, cfg.SigningOverlap, tc.deny, tc.allow, tc.overlap)
			}
		})
	}
}
