package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/chimehq/chime/internal/base/testenv"
)

// TestEmailAllow: --email-allow (domains and addresses), by default the
// domain of --smtp-from, bounds send_email at save (ValidateArgs) and at
// send (Run), generate_report's email, and the notifications' emailer.
func TestEmailAllow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		allow []string
		to    string
		ok    bool
	}{
		{"default: the sender's domain", nil, "ops@example.com", true},
		{"default: case", nil, "Ops@EXAMPLE.com", true},
		{"default: another domain", nil, "attacker@evil.test", false},
		{"default: a subdomain", nil, "ops@mail.example.com", false},
		{"a listed domain", []string{"corp.test", "ops@other.test"}, "x@corp.test", true},
		{"a listed address", []string{"corp.test", "ops@other.test"}, "OPS@other.test", true},
		{"another address of a listed address's domain", []string{"corp.test", "ops@other.test"}, "dev@other.test", false},
		{"the sender's domain, not listed", []string{"corp.test"}, "ops@example.com", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := SMTPConfig{Host: "127.0.0.1", Port: 1, From: "Chime <chime@example.com>", Allow: tc.allow}
			s := &SendEmail{Config: cfg}
			args := json.RawMessage(`{"to": ["` + tc.to + `"], "subject": "s"}`)
			check := func(what string, err error) {
				t.Helper()
				if tc.ok && errors.Is(err, ErrRecipient) || !tc.ok && !errors.Is(err, ErrRecipient) {
					t.Errorf("%s to %s: %v, want allowed %v", what, tc.to, err, tc.ok)
				}
			}
			check("ValidateArgs", s.ValidateArgs(args))
			_, err := s.Run(context.Background(), runWith(string(args)))
			check("Run", err)
			check("SendEmail", s.SendEmail(context.Background(), []string{tc.to}, "s", "b", "m1"))
			g := &GenerateReport{SMTP: cfg}
			check("generate_report", g.ValidateArgs(json.RawMessage(`{"period": "24h", "email": {"to": ["`+tc.to+`"]}}`)))
		})
	}
}

// TestEmailAllowNothingSent: a refused recipient reaches no SMTP server.
func TestEmailAllowNothingSent(t *testing.T) {
	srv := testenv.NewSMTPServer(t, nil)
	s := &SendEmail{Config: SMTPConfig{Host: "127.0.0.1", Port: srv.Port(), From: "chime@example.com"}}
	_, err := s.Run(context.Background(), runWith(`{"to": ["ops@example.com", "x@evil.test"], "subject": "s"}`))
	if !errors.Is(err, ErrRecipient) || !strings.Contains(err.Error(), "x@evil.test") {
		t.Fatalf("err %v", err)
	}
	if err := s.SendEmail(context.Background(), []string{"x@evil.test"}, "s", "b", "m"); !errors.Is(err, ErrRecipient) {
		t.Fatalf("SendEmail: %v", err)
	}
	if n := len(srv.Messages()); n != 0 {
		t.Fatalf("%d messages sent", n)
	}
}
