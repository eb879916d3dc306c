package model

import (
	"bytes"
	"encoding/json"
	"fmt"
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
// are case-insensitive), besides those that contain one of
// SecretHeaderWords. HTTPAction.SecretHeaders adds others per action.
var SecretHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key",
	"X-Auth-Token", "Private-Token", "X-Vault-Token", "X-Amz-Security-Token"}

// SecretHeaderWords make a header secret when its name contains one of
// them, case-insensitively (X-Signing-Secret, X-Upload-Token, X-Key-Id).
var SecretHeaderWords = []string{"secret", "token", "password", "key"}

// SecretRef names one secret value of an action.
type SecretRef struct {
	// Field is the value's API field: action.http.header.<Name>,
	// action.http.url (the password of its userinfo),
	// action.shell.env.<KEY> or action.handler.args.<name>.
	Field string
	// Key identifies the value across versions of an action: "header:"
	// and the canonical header name, "url:password", "env:" and the
	// variable, or "arg:" and the member of the handler's args.
	Key string
}

// IsSecretHeader reports whether the values of header name are secret in
// h: one of SecretHeaders or of h.SecretHeaders, case-insensitively, or a
// name that contains one of SecretHeaderWords.
func (h *HTTPAction) IsSecretHeader(name string) bool {
	eq := func(s string) bool { return strings.EqualFold(s, name) }
	if slices.ContainsFunc(SecretHeaders, eq) || slices.ContainsFunc(h.SecretHeaders, eq) {
		return true
	}
	lower := strings.ToLower(name)
	return slices.ContainsFunc(SecretHeaderWords, func(w string) bool { return strings.Contains(lower, w) })
}

// WalkSecrets is the one rule of what is secret in an action. It calls f
// with each secret value of a — the values of the secret headers of an
// HTTP action (see IsSecretHeader), the password of its URL's userinfo,
// every env value of a shell action, and the members of a handler's args
// named by its SecretArgs (JSON strings) — in a fixed order, and sets each
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
	if h := a.Handler; h != nil && len(h.SecretArgs) > 0 {
		return h.walkSecretArgs(f)
	}
	return nil
}

// walkSecretArgs is WalkSecrets for the secret args of h. Args that are
// not a JSON object, and named members that are not strings, are left
// alone (validation refuses them).
func (h *HandlerAction) walkSecretArgs(f func(ref SecretRef, v string) (string, error)) error {
	var args map[string]json.RawMessage
	if json.Unmarshal(h.Args, &args) != nil || args == nil {
		return nil
	}
	changed := false
	for _, k := range slices.Sorted(slices.Values(slices.Compact(slices.Sorted(slices.Values(h.SecretArgs))))) {
		raw, ok := args[k]
		var v string
		if !ok || json.Unmarshal(raw, &v) != nil {
			continue
		}
		nv, err := f(SecretRef{Field: "action.handler.args." + k, Key: "arg:" + k}, v)
		if err != nil {
			return err
		}
		if nv != v {
			b, err := marshalJSON(nv)
			if err != nil {
				return fmt.Errorf("action.handler.args.%s: %w", k, err)
			}
			args[k], changed = b, true
		}
	}
	if changed {
		b, err := marshalJSON(args)
		if err != nil {
			return fmt.Errorf("action.handler.args: %w", err)
		}
		h.Args = b
	}
	return nil
}

// marshalJSON is json.Marshal without the escaping of <, > and &, which
// would turn Redacted into "\u003credacted\u003e".
func marshalJSON(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
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
// when there is none, as on creation). A secret is kept only when nothing
// of the action but its secret values changed (see ChangedField): another
// method, URL, body, header, command, argument, env name or handler would
// let someone who may not read the secret send it elsewhere. It returns a
// *FieldError naming the first Redacted value that it cannot keep. A
// header value that is Redacted but not secret is refused too (it would be
// stored as is).
func (a *Action) KeepSecrets(old *Action) error {
	stored := map[string]string{}
	changed := ""
	if old != nil {
		changed = ChangedField(a, old)
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
		case old == nil:
			return "", Errorf(ref.Field, "is %q, which keeps a stored secret, but there is none on creation: give the value", Redacted)
		case changed != "":
			return "", Errorf(ref.Field, "is %q, but the secret must be given again because %s changed", Redacted, changed)
		case ok:
			return kept, nil
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

// ChangedField names the first field in which a and b differ other than
// their secret values (see WalkSecrets), "" when they differ in nothing
// else: action.type, action.http.method, action.http.url (anything of it
// but its password), action.http.body, action.http.header.<Name> (a header
// added, removed, renamed or, when not secret, given another value),
// action.http.secret_headers, action.shell.command, action.shell.args,
// action.shell.env.<KEY> (a variable added or removed), action.shell.dir,
// action.handler.name, action.handler.args (anything but its secret
// members) or action.handler.secret_args.
func ChangedField(a, b *Action) string {
	x, y := a.Clone(), b.Clone()
	blank := func(SecretRef, string) (string, error) { return "", nil }
	_ = x.WalkSecrets(blank)
	_ = y.WalkSecrets(blank)
	if x.Type != y.Type || (x.HTTP == nil) != (y.HTTP == nil) || (x.Shell == nil) != (y.Shell == nil) || (x.Handler == nil) != (y.Handler == nil) {
		return "action.type"
	}
	if h, g := x.HTTP, y.HTTP; h != nil {
		switch {
		case h.Method != g.Method:
			return "action.http.method"
		case h.URL != g.URL:
			return "action.http.url"
		case h.Body != g.Body:
			return "action.http.body"
		}
		if k, ok := firstMapDiff(h.Header, g.Header); ok {
			return "action.http.header." + k
		}
		if !slices.Equal(h.SecretHeaders, g.SecretHeaders) {
			return "action.http.secret_headers"
		}
	}
	if s, r := x.Shell, y.Shell; s != nil {
		switch {
		case s.Command != r.Command:
			return "action.shell.command"
		case !slices.Equal(s.Args, r.Args):
			return "action.shell.args"
		}
		if k, ok := firstMapDiff(s.Env, r.Env); ok {
			return "action.shell.env." + k
		}
		if s.Dir != r.Dir {
			return "action.shell.dir"
		}
	}
	if h, g := x.Handler, y.Handler; h != nil {
		switch {
		case h.Name != g.Name:
			return "action.handler.name"
		case !sameJSON(h.Args, g.Args):
			return "action.handler.args"
		case !slices.Equal(h.SecretArgs, g.SecretArgs):
			return "action.handler.secret_args"
		}
	}
	return ""
}

// firstMapDiff returns the first key, in sorted order, that is in one of
// a and b only or has different values in them.
func firstMapDiff(a, b map[string]string) (string, bool) {
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		if oka != okb || va != vb {
			return k, true
		}
	}
	return "", false
}

// sameJSON reports whether a and b are the same JSON text but for
// insignificant white space.
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
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
		h.SecretArgs = slices.Clone(h.SecretArgs)
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

// A notification rule's webhook URL is a secret (it often carries a
// password or a path token): WalkNotifySecrets is the rule of it, which
// redaction, keeping and encryption at rest follow as they follow
// WalkSecrets for actions.

// WalkNotifySecrets calls f with the webhook URL of each rule of rules
// that has one, its field being field, "[i].webhook.url", and sets it to
// what f returns. The first error of f stops the walk. It changes the
// rules' webhooks in place: CloneNotify shared rules first.
func WalkNotifySecrets(field string, rules []NotifyRule, f func(field, v string) (string, error)) error {
	for i := range rules {
		w := rules[i].Webhook
		if w == nil {
			continue
		}
		v, err := f(fmt.Sprintf("%s[%d].webhook.url", field, i), w.URL)
		if err != nil {
			return err
		}
		w.URL = v
	}
	return nil
}

// CloneNotify returns a deep copy of rules (nil for nil).
func CloneNotify(rules []NotifyRule) []NotifyRule {
	if rules == nil {
		return nil
	}
	out := slices.Clone(rules)
	for i := range out {
		if w := out[i].Webhook; w != nil {
			c := *w
			out[i].Webhook = &c
		}
		if e := out[i].Email; e != nil {
			c := NotifyEmail{To: slices.Clone(e.To)}
			out[i].Email = &c
		}
	}
	return out
}

// RedactNotify returns a copy of rules with every webhook URL Redacted.
func RedactNotify(rules []NotifyRule) []NotifyRule {
	out := CloneNotify(rules)
	_ = WalkNotifySecrets("", out, func(_, v string) (string, error) {
		if v == "" {
			return v, nil
		}
		return Redacted, nil
	})
	return out
}

// KeepNotifySecrets replaces each webhook URL of rules that is Redacted
// with the URL of the same rule of old, the stored rules (nil when there
// are none): the rule at the same index, with the same On and Threshold.
// It returns a *FieldError (under field) naming the first Redacted URL that
// it cannot keep.
func KeepNotifySecrets(field string, rules, old []NotifyRule) error {
	for i := range rules {
		w := rules[i].Webhook
		if w == nil || w.URL != Redacted {
			continue
		}
		f := fmt.Sprintf("%s[%d].webhook.url", field, i)
		if i >= len(old) || old[i].Webhook == nil || old[i].Webhook.URL == "" {
			return Errorf(f, "is %q, which keeps a stored webhook URL, but rule %d has none: give the URL", Redacted, i)
		}
		if o := old[i]; o.On != rules[i].On || o.Threshold != rules[i].Threshold {
			return Errorf(f, "is %q, but the URL must be given again because the rule's on or threshold changed", Redacted)
		}
		w.URL = old[i].Webhook.URL
	}
	return nil
}

// RedactTarget returns the target of a notification as the API shows it:
// a webhook's URL reduced to its origin and Redacted; an email's
// recipients as they are.
func RedactTarget(channel, target string) string {
	if channel != ChannelWebhook || target == "" {
		return target
	}
	if p, ok := splitURL(target); ok {
		return p.origin() + "/" + Redacted
	}
	return Redacted
}
