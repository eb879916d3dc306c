package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestShellEnvPassFlag: --shell-env-pass takes variable names from the
// command line, CHIME_SHELL_ENV_PASS or the YAML file; a bad name, a node
// secret or the flag without --allow-shell is exit 2 naming the flag.
func TestShellEnvPassFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     string
		yaml    string
		want    []string
		wantErr string
	}{
		{name: "none", args: []string{"--allow-shell"}},
		{name: "flag", args: []string{"--allow-shell", "--shell-env-pass", "AWS_REGION,PGHOST", "--shell-env-pass=HTTPS_PROXY"}, want: []string{"AWS_REGION", "PGHOST", "HTTPS_PROXY"}},
		{name: "env", args: []string{"--allow-shell"}, env: "AWS_REGION,PGHOST", want: []string{"AWS_REGION", "PGHOST"}},
		{name: "yaml", yaml: "allow-shell: true\nshell-env-pass: [AWS_REGION, PGHOST]\n", want: []string{"AWS_REGION", "PGHOST"}},
		{name: "bad name", args: []string{"--allow-shell", "--shell-env-pass", "A-B"}, wantErr: "--shell-env-pass"},
		{name: "node secret", args: []string{"--allow-shell", "--shell-env-pass", "CHIME_ADMIN_TOKEN"}, wantErr: "secret"},
		{name: "secret key", args: []string{"--allow-shell", "--shell-env-pass", "CHIME_SECRET_KEY"}, wantErr: "secret"},
		{name: "without allow-shell", args: []string{"--shell-env-pass", "PGHOST"}, wantErr: "--allow-shell"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("CHIME_SHELL_ENV_PASS", tc.env)
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
			if !slices.Equal(cfg.ShellEnvPass, tc.want) {
				t.Errorf("ShellEnvPass = %q, want %q", cfg.ShellEnvPass, tc.want)
			}
		})
	}
}
