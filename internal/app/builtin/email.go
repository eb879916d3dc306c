package builtin

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"strconv"
	"strings"
	"time"

	"github.com/chimehq/chime"
)

// SMTPConfig is the node's SMTP server for send_email (flags --smtp-host,
// --smtp-port, --smtp-from, --smtp-username, --smtp-password,
// --smtp-starttls).
type SMTPConfig struct {
	Host     string
	Port     int // default 587 with STARTTLS, else 25
	From     string
	Username string // with Password: AUTH PLAIN (needs STARTTLS unless the host is local)
	Password string
	StartTLS bool
	// Allow (--email-allow) lists the recipients email may go to: domains
	// ("example.com") and addresses ("ops@example.org"), compared without
	// case. Empty: the domain of From. It bounds send_email,
	// generate_report's email and the failure notifications, at save and
	// at send.
	Allow []string
	// TLS, when set, is used for STARTTLS (tests); default: verify Host.
	TLS *tls.Config
}

func (c SMTPConfig) addr() string {
	port := c.Port
	if port == 0 {
		port = 25
		if c.StartTLS {
			port = 587
		}
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(port))
}

// EmailArgs are the args of send_email:
//
//	{"to": ["ops@example.com"], "subject": "Nightly report", "body": "..."}
//
// To is one address or a list of them ("Ops <ops@example.com>" works).
type EmailArgs struct {
	To      stringList `json:"to"`
	Subject string     `json:"subject"`
	Body    string     `json:"body"`
}

// stringList decodes a JSON string or array of strings.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("to must be an address or a list of addresses")
	}
	*l = many
	return nil
}

// ErrRecipient is wrapped by the error of a recipient --email-allow does
// not allow.
var ErrRecipient = errors.New("recipient not allowed")

// CheckRecipient returns an error wrapping ErrRecipient when c may not
// send to address (a bare address, "ops@example.com"), else nil.
func (c SMTPConfig) CheckRecipient(address string) error {
	allow := c.Allow
	if len(allow) == 0 {
		from, err := mail.ParseAddress(c.From)
		if err != nil {
			return fmt.Errorf("%w: %s: without --email-allow email goes only to the domain of --smtp-from, which is not set", ErrRecipient, address)
		}
		allow = []string{from.Address[strings.LastIndexByte(from.Address, '@')+1:]}
	}
	at := strings.LastIndexByte(address, '@')
	if at < 0 {
		return fmt.Errorf("%w: %q has no domain", ErrRecipient, address)
	}
	domain := address[at+1:]
	for _, a := range allow {
		a = strings.TrimSpace(a)
		if strings.Contains(a, "@") && strings.EqualFold(a, address) || !strings.Contains(a, "@") && strings.EqualFold(a, domain) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not among the recipients this server sends to (--email-allow: %s)", ErrRecipient, address, strings.Join(allow, ", "))
}

// check reports whether c can send: a host and a sender. handler names
// the handler that needs it in the error.
func (c SMTPConfig) check(handler string) error {
	if c.Host == "" {
		return fmt.Errorf("%s: email is not configured on this server: start it with --smtp-host (and --smtp-from)", handler)
	}
	if c.From == "" {
		return fmt.Errorf("%s: email is not configured on this server: start it with --smtp-from", handler)
	}
	return nil
}

// parseTo parses the addresses of field: 1 to 100 of them, each one c
// may send to.
func (c SMTPConfig) parseTo(field string, list []string) ([]*mail.Address, error) {
	if len(list) == 0 {
		return nil, fmt.Errorf("%s is required", field)
	}
	if len(list) > 100 {
		return nil, fmt.Errorf("%s has more than 100 addresses", field)
	}
	var to []*mail.Address
	for _, t := range list {
		addr, err := mail.ParseAddress(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an email address", field, t)
		}
		if err := c.CheckRecipient(addr.Address); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		to = append(to, addr)
	}
	return to, nil
}

// SendEmail is the send_email handler.
type SendEmail struct {
	Config SMTPConfig
}

func (s *SendEmail) parse(raw json.RawMessage) (EmailArgs, []*mail.Address, error) {
	var a EmailArgs
	if err := s.Config.check(SendEmailName); err != nil {
		return a, nil, err
	}
	if err := decodeStrict(raw, &a); err != nil {
		return a, nil, err
	}
	to, err := s.Config.parseTo("to", a.To)
	if err != nil {
		return a, nil, err
	}
	if strings.TrimSpace(a.Subject) == "" {
		return a, nil, errors.New("subject is required")
	}
	if strings.ContainsAny(a.Subject, "\r\n") {
		return a, nil, errors.New("subject must not contain a line break")
	}
	if len(a.Body) > 1<<20 {
		return a, nil, errors.New("body is larger than 1 MiB")
	}
	return a, to, nil
}

// ValidateArgs checks the args when a timer is created.
func (s *SendEmail) ValidateArgs(args json.RawMessage) error {
	_, _, err := s.parse(args)
	return err
}

// Run sends the email. The Message-ID is derived from the run id, so a
// retried attempt sends the same message id and receivers can drop the
// duplicate.
func (s *SendEmail) Run(ctx context.Context, run *chime.Run) ([]byte, error) {
	a, to, err := s.parse(run.Args)
	if err != nil {
		return nil, err
	}
	from, err := mail.ParseAddress(s.Config.From)
	if err != nil {
		return nil, fmt.Errorf("--smtp-from %q is not an email address", s.Config.From)
	}
	msg := message(from, to, a.Subject, a.Body, "text/plain", run.ID)
	if err := s.Config.deliver(ctx, from, to, msg); err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "sent %q to %d recipients", a.Subject, len(to)), nil
}

// deliver sends msg from from to to through the SMTP server of c.
func (c SMTPConfig) deliver(ctx context.Context, from *mail.Address, to []*mail.Address, msg []byte) error {
	d := net.Dialer{Timeout: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", c.addr())
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	sc, err := smtp.NewClient(conn, c.Host)
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	defer sc.Close()
	if err := sc.Hello("chime"); err != nil {
		return fmt.Errorf("smtp HELO: %w", err)
	}
	if c.StartTLS {
		cfg := c.TLS
		if cfg == nil {
			cfg = &tls.Config{ServerName: c.Host}
		}
		if err := sc.StartTLS(cfg); err != nil {
			return fmt.Errorf("smtp STARTTLS: %w", err)
		}
	}
	if c.Username != "" {
		if err := sc.Auth(smtp.PlainAuth("", c.Username, c.Password, c.Host)); err != nil {
			return fmt.Errorf("smtp AUTH: %w", err)
		}
	}
	if err := sc.Mail(from.Address); err != nil {
		return fmt.Errorf("smtp MAIL FROM: %w", err)
	}
	for _, t := range to {
		if err := sc.Rcpt(t.Address); err != nil {
			return fmt.Errorf("smtp RCPT TO %s: %w", t.Address, err)
		}
	}
	w, err := sc.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	_ = sc.Quit()
	return nil
}

// message is an email of contentType (text/plain or text/html, UTF-8,
// quoted-printable) whose Message-ID is derived from runID.
func message(from *mail.Address, to []*mail.Address, subject, body, contentType, runID string) []byte {
	var b bytes.Buffer
	list := make([]string, len(to))
	for i, t := range to {
		list[i] = t.String()
	}
	fmt.Fprintf(&b, "From: %s\r\n", from.String())
	fmt.Fprintf(&b, "To: %s\r\n", strings.Join(list, ", "))
	fmt.Fprintf(&b, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", subject))
	fmt.Fprintf(&b, "Date: %s\r\n", time.Now().Format(time.RFC1123Z))
	host := "chime"
	if i := strings.LastIndexByte(from.Address, '@'); i >= 0 {
		host = from.Address[i+1:]
	}
	fmt.Fprintf(&b, "Message-ID: <%s@%s>\r\n", runID, host)
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: " + contentType + "; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\n", "\r\n")))
	_ = qp.Close()
	b.WriteString("\r\n")
	return b.Bytes()
}

// SendEmail sends one plain-text email with the handler's SMTP settings:
// the failure notifications' emailer (notify.Emailer). Its Message-ID is
// derived from messageID.
func (s *SendEmail) SendEmail(ctx context.Context, to []string, subject, body, messageID string) error {
	if s.Config.Host == "" || s.Config.From == "" {
		return errors.New("email notifications need the node's SMTP settings: start it with --smtp-host and --smtp-from")
	}
	from, err := mail.ParseAddress(s.Config.From)
	if err != nil {
		return fmt.Errorf("--smtp-from %q is not an email address", s.Config.From)
	}
	var addrs []*mail.Address
	for _, t := range to {
		addr, err := mail.ParseAddress(t)
		if err != nil {
			return fmt.Errorf("to: %q is not an email address", t)
		}
		if err := s.Config.CheckRecipient(addr.Address); err != nil {
			return fmt.Errorf("to: %w", err)
		}
		addrs = append(addrs, addr)
	}
	return s.Config.deliver(ctx, from, addrs, message(from, addrs, subject, body, "text/plain", messageID))
}
