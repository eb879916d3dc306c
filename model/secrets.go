package model

import (
	"maps"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
)

// Redacted is what API answers show in place of a secret value, and what a
// client sends back in an update to keep the stored value.
const Redacted = "<redacted>"

// SecretHeaders are the header names whose values are always secret (names
// are case-insensitive). HTTPAction.SecretHeaders adds others per action.
var SecretHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key"}

// SecretRef names one secret value of an action.
type SecretRef struct {
	// Field is the value's API field: action.http.header.<Name>,
	// action.http.url (the password of its userinfo) or
	// action.shell.env.<KEY>.
	Field string
	// Key identifies the value across versions of an action: "header:"
	// and the canonical header name, "url:password", or "env:" and the
	// variable.
	Key string
}

// IsSecretHeader reports whether the values of header name are secret in
// h: one of SecretHeaders or of h.SecretHeaders, case-insensitively.
func (h *HTTPAction) IsSecretHeader(name string) bool {
	eq := func(s string) bool { return strings.EqualFold(s, name) }
	return slices.ContainsFunc(SecretHeaders, eq) || slices.ContainsFunc(h.SecretHeaders, eq)
}

// WalkSecrets is the one rule of what is secret in an action. It calls f
// with each secret value of a — the values of the secret headers of an
// HTTP action (see IsSecretHeader), the password of its URL's userinfo,
// and every env value of a shell action — in a fixed order, and sets each
// to what f returns. The first error of f stops the walk and is returned.
// Redaction, the keeping of redacted values on update and the encryption
// at rest all walk with it. It changes a in place: Clone a shared action
// first.
func (a *Action) WalkSecrets(f func(ref SecretRef, v string) (string, error)) error {
	if h := a.HTTP; h != nil {
		for _, k := range slices.Sorted(maps.Keys(h.Header)) {
			if !h.IsSecretHeader(k) {
				continue
			}
			name := textproto.CanonicalMIMEHeaderKey(k)
			v, err := f(SecretRef{Field: "action.http.header." + k, Key: "header:" + name}, h.Header[k])
			if err != nil {
				return err
			}
			h.Header[k] = v
		}
		if p, ok := splitURL(h.URL); ok && p.hasPassword {
			pw := p.password()
			v, err := f(SecretRef{Field: "action.http.url", Key: "url:password"}, pw)
			if err != nil {
				return err
			}
			if v != pw {
				h.URL = p.withPassword(v)
			}
		}
	}
	if s := a.Shell; s != nil {
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			v, err := f(SecretRef{Field: "action.shell.env." + k, Key: "env:" + k}, s.Env[k])
			if err != nil {
				return err
			}
			s.Env[k] = v
		}
	}
	return nil
}

// Redact replaces every non-empty secret value of a (see WalkSecrets) with
// Redacted. It changes a in place: Clone a shared action first.
func (a *Action) Redact() {
	_ = a.WalkSecrets(func(_ SecretRef, v string) (string, error) {
		if v == "" {
			return v, nil
		}
		return Redacted, nil
	})
}

// KeepSecrets replaces each secret value of a that is Redacted with the
// value of the same secret in old, the stored version of the action (nil
// when there is none, as on creation). It returns a *FieldError naming the
// first Redacted value that it cannot keep: old has no such secret, or a
// sends to another destination than old — another action type, another
// scheme, host or port of the URL, another shell command or args — where
// keeping the secret would let someone who may not read it send it
// elsewhere. A header value that is Redacted but not secret is refused too
// (it would be stored as is).
func (a *Action) KeepSecrets(old *Action) error {
	stored := map[string]string{}
	if old != nil && sameDestination(a, old) {
		o := old.Clone()
		_ = o.WalkSecrets(func(ref SecretRef, v string) (string, error) {
			stored[ref.Key] = v
			return v, nil
		})
	}
	err := a.WalkSecrets(func(ref SecretRef, v string) (string, error) {
		if v != Redacted {
			return v, nil
		}
		kept, ok := stored[ref.Key]
		switch {
		case ok:
			return kept, nil
		case old == nil:
			return "", Errorf(ref.Field, "is %q, which keeps a stored secret, but there is none on creation: give the value", Redacted)
		case !sameDestination(a, old):
			return "", Errorf(ref.Field, "is %q, but the action now goes elsewhere (another URL host or command): give the secret value again", Redacted)
		default:
			return "", Errorf(ref.Field, "is %q, but the timer has no stored value to keep: give the value", Redacted)
		}
	})
	if err != nil {
		return err
	}
	if h := a.HTTP; h != nil {
		for _, k := range slices.Sorted(maps.Keys(h.Header)) {
			if h.Header[k] == Redacted && !h.IsSecretHeader(k) {
				return Errorf("action.http.header."+k, "is %q, but %s is not a secret header (see action.http.secret_headers): give the value", Redacted, k)
			}
		}
	}
	return nil
}

// sameDestination reports whether a and b send their secrets to the same
// place: the same HTTP origin (scheme, host and port) or the same shell
// command and args.
func sameDestination(a, b *Action) bool {
	if a.Type != b.Type {
		return false
	}
	switch {
	case a.HTTP != nil && b.HTTP != nil:
		pa, oka := splitURL(a.HTTP.URL)
		pb, okb := splitURL(b.HTTP.URL)
		return oka && okb && pa.origin() == pb.origin()
	case a.Shell != nil && b.Shell != nil:
		return a.Shell.Command == b.Shell.Command && slices.Equal(a.Shell.Args, b.Shell.Args)
	}
	return false
}

// Clone returns a deep copy of a.
func (a Action) Clone() Action {
	if a.HTTP != nil {
		h := *a.HTTP
		h.Header = maps.Clone(h.Header)
		h.SecretHeaders = slices.Clone(h.SecretHeaders)
		a.HTTP = &h
	}
	if a.Handler != nil {
		h := *a.Handler
		h.Args = slices.Clone(h.Args)
		a.Handler = &h
	}
	if a.Shell != nil {
		s := *a.Shell
		s.Args = slices.Clone(s.Args)
		s.Env = maps.Clone(s.Env)
		a.Shell = &s
	}
	return a
}

// urlParts splits a raw URL around the password of its userinfo without
// parsing (or re-encoding) the rest, so that a URL that does not parse,
// such as one with a literal "<redacted>" password, is handled too and the
// rest of the URL is kept byte for byte.
type urlParts struct {
	raw              string
	scheme, hostport string // lower case
	pwStart, pwEnd   int    // the raw password is raw[pwStart:pwEnd]
	hasPassword      bool
}

func splitURL(raw string) (urlParts, bool) {
	p := urlParts{raw: raw}
	i := strings.Index(raw, "://")
	if i <= 0 {
		return p, false
	}
	p.scheme = strings.ToLower(raw[:i])
	start := i + 3
	end := len(raw)
	if j := strings.IndexAny(raw[start:], "/?#"); j >= 0 {
		end = start + j
	}
	authority := raw[start:end]
	at := strings.LastIndexByte(authority, '@')
	p.hostport = strings.ToLower(authority[at+1:])
	if at < 0 {
		return p, true
	}
	if c := strings.IndexByte(authority[:at], ':'); c >= 0 {
		p.hasPassword = true
		p.pwStart, p.pwEnd = start+c+1, start+at
	}
	return p, true
}

// password returns the decoded password (the raw text when it does not
// decode): "%3Credacted%3E" and "<redacted>" are both Redacted.
func (p urlParts) password() string {
	raw := p.raw[p.pwStart:p.pwEnd]
	if v, err := url.PathUnescape(raw); err == nil {
		return v
	}
	return raw
}

// withPassword returns the URL with its password replaced by pw, encoded.
func (p urlParts) withPassword(pw string) string {
	enc := strings.TrimPrefix(url.UserPassword("", pw).String(), ":")
	return p.raw[:p.pwStart] + enc + p.raw[p.pwEnd:]
}

func (p urlParts) origin() string { return p.scheme + "://" + p.hostport }
