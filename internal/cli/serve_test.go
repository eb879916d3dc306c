package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
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
