package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestEmailAllowFlag: --email-allow takes domains and addresses from the
// command line, CHIME_EMAIL_ALLOW or the YAML file; anything else is exit
// 2 naming the flag.
func TestEmailAllowFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     string
		yaml    string
		want    []string
		wantErr string
	}{
		{name: "none"},
		{name: "flag", args: []string{"--email-allow", "example.com,ops@partner.test", "--email-allow=corp.example.org"}, want: []string{"example.com", "ops@partner.test", "corp.example.org"}},
		{name: "env", env: "example.com", want: []string{"example.com"}},
		{name: "yaml", yaml: "email-allow: [example.com, ops@partner.test]\n", want: []string{"example.com", "ops@partner.test"}},
		{name: "not a domain", args: []string{"--email-allow", "exa mple.com"}, wantErr: "--email-allow"},
		{name: "a name with the address", args: []string{"--email-allow", "Ops <ops@example.com>"}, wantErr: "--email-allow"},
		{name: "a bare word", args: []string{"--email-allow", "localhost"}, wantErr: "--email-allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("CHIME_EMAIL_ALLOW", tc.env)
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
			if !slices.Equal(cfg.SMTP.Allow, tc.want) {
				t.Errorf("Allow = %q, want %q", cfg.SMTP.Allow, tc.want)
			}
		})
	}
}
