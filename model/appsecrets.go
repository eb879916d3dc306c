package model

import (
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// AppSecret is a secret kept per app: actions of the app's timers refer to
// it as {{secret.NAME}} in an HTTP header value, the userinfo of an HTTP
// URL, an HTTP body or a shell env value, and chime puts the value in when
// the action runs, and only for an HTTP action whose URL host is one of
// Hosts or a shell action whose command is one of Commands.
type AppSecret struct {
	App  string `json:"app"`
	Name string `json:"name"`
	// Value is write-only: the API never answers it.
	Value string `json:"-"`
	// Hosts are the URL host names (case-insensitive, without port) the
	// secret may be sent to.
	Hosts []string `json:"hosts"`
	// Commands are the shell commands, exactly as the actions name them,
	// that may receive the secret.
	Commands  []string  `json:"commands"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// MaxAppSecretValue is the most bytes of an AppSecret's value.
const MaxAppSecretValue = 16 << 10

// appSecretName is what an AppSecret's name looks like.
var appSecretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ValidAppSecretName reports whether name may name an AppSecret: a letter
// or underscore, then letters, digits and underscores, 64 at most.
func ValidAppSecretName(name string) bool { return appSecretName.MatchString(name) }

// secretRefPattern matches a reference to an AppSecret and anything that
// looks like one, so that a misspelt one is refused rather than sent.
var secretRefPattern = regexp.MustCompile(`\{\{\s*secret\.([^{}]*?)\s*\}\}`)

// AppSecretRef is one {{secret.NAME}} of an action.
type AppSecretRef struct {
	// Field is where it is: action.http.header.<Name>, action.http.url,
	// action.http.body or action.shell.env.<KEY>.
	Field string
	Name  string
}

// HasAppSecretRefs reports whether a refers to any AppSecret (or holds
// something that looks like a reference), cheaply.
func (a *Action) HasAppSecretRefs() bool {
	found := false
	_ = a.walkRefPlaces(func(_ string, v string, _ func(string) string) (string, error) {
		if !found && strings.Contains(v, "{{") && secretRefPattern.MatchString(v) {
			found = true
		}
		return v, nil
	})
	return found
}

// AppSecretRefs returns the references of a to AppSecrets, in a fixed
// order. It returns a *FieldError when one is malformed or is where none
// may be (the URL outside its userinfo, the method, a command or its
// args, a handler's args).
func (a *Action) AppSecretRefs() ([]AppSecretRef, error) {
	var refs []AppSecretRef
	err := a.walkRefPlaces(func(field, v string, enc func(string) string) (string, error) {
		for _, m := range secretRefPattern.FindAllStringSubmatch(v, -1) {
			if enc == nil {
				return v, Errorf(field, "refers to an app secret (%s), which may only appear in an HTTP header value, the URL's userinfo, the body or a shell env value", m[0])
			}
			if !ValidAppSecretName(m[1]) {
				return v, Errorf(field, "%s does not name an app secret: write {{secret.NAME}}, NAME of letters, digits and underscores", m[0])
			}
			refs = append(refs, AppSecretRef{Field: field, Name: m[1]})
		}
		return v, nil
	})
	return refs, err
}

// ResolveAppSecrets replaces, in place, each {{secret.NAME}} of a with the
// value of the app secret NAME of secrets (by name), and returns the
// values it put in. It fails, changing nothing that is sent, when a
// reference is misplaced or names no secret, or when the action's
// destination (the URL's host, the shell command) is not among those of
// the secret. Clone a shared action first.
func (a *Action) ResolveAppSecrets(secrets map[string]*AppSecret) ([]string, error) {
	refs, err := a.AppSecretRefs()
	if err != nil {
		return nil, err
	}
	for _, r := range refs {
		s := secrets[r.Name]
		if s == nil {
			return nil, Errorf(r.Field, "app secret %q does not exist", r.Name)
		}
		if err := a.AppSecretAllowed(r.Field, s); err != nil {
			return nil, err
		}
	}
	var used []string
	err = a.walkRefPlaces(func(field, v string, enc func(string) string) (string, error) {
		if enc == nil || !strings.Contains(v, "{{") {
			return v, nil
		}
		return secretRefPattern.ReplaceAllStringFunc(v, func(m string) string {
			name := secretRefPattern.FindStringSubmatch(m)[1]
			used = append(used, secrets[name].Value)
			return enc(secrets[name].Value)
		}), nil
	})
	return used, err
}

// AppSecretAllowed returns a *FieldError on field when a may not receive
// the app secret s: an HTTP action whose URL host is not one of s.Hosts,
// a shell action whose command is not one of s.Commands, or another kind
// of action.
func (a *Action) AppSecretAllowed(field string, s *AppSecret) error {
	switch {
	case a.HTTP != nil:
		host := ""
		if p, ok := splitURL(a.HTTP.URL); ok {
			host = p.hostport
			if u, err := url.Parse("//" + host); err == nil {
				host = u.Hostname()
			}
		}
		if !slices.ContainsFunc(s.Hosts, func(h string) bool { return strings.EqualFold(h, host) }) {
			return Errorf(field, "app secret %q may not be sent to host %q (its hosts: %s)", s.Name, host, listOrNone(s.Hosts))
		}
	case a.Shell != nil:
		if !slices.Contains(s.Commands, a.Shell.Command) {
			return Errorf(field, "app secret %q may not be given to command %q (its commands: %s)", s.Name, a.Shell.Command, listOrNone(s.Commands))
		}
	default:
		return Errorf(field, "app secret %q may only be used by http and shell actions", s.Name)
	}
	return nil
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// walkRefPlaces calls f with each text of a where a reference may be, or
// might be written by mistake, and sets it to what f returns when that
// differs (so that a walk that changes nothing writes nothing: a shared
// action may be walked concurrently). enc, nil
// where no reference may be, encodes a value put in the text: the
// identity but in the URL's userinfo, the one place of the URL where
// references may be.
func (a *Action) walkRefPlaces(f func(field, v string, enc func(string) string) (string, error)) error {
	plain := func(v string) string { return v }
	if h := a.HTTP; h != nil {
		for _, k := range slices.Sorted(maps.Keys(h.Header)) {
			v, err := f("action.http.header."+k, h.Header[k], plain)
			if err != nil {
				return err
			}
			if v != h.Header[k] {
				h.Header[k] = v
			}
		}
		start, at := userinfoBounds(h.URL)
		rest := h.URL
		if at > start {
			rest = h.URL[:start] + h.URL[at:]
		}
		if _, err := f("action.http.url", rest, nil); err != nil {
			return err
		}
		if user := h.URL[start:at]; user != "" {
			v, err := f("action.http.url", user, encodeUserinfo)
			if err != nil {
				return err
			}
			if v != user {
				h.URL = h.URL[:start] + v + h.URL[at:]
			}
		}
		v, err := f("action.http.body", h.Body, plain)
		if err != nil {
			return err
		}
		if v != h.Body {
			h.Body = v
		}
		if _, err := f("action.http.method", h.Method, nil); err != nil {
			return err
		}
	}
	if s := a.Shell; s != nil {
		if _, err := f("action.shell.command", s.Command, nil); err != nil {
			return err
		}
		for _, arg := range s.Args {
			if _, err := f("action.shell.args", arg, nil); err != nil {
				return err
			}
		}
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			v, err := f("action.shell.env."+k, s.Env[k], plain)
			if err != nil {
				return err
			}
			if v != s.Env[k] {
				s.Env[k] = v
			}
		}
	}
	if h := a.Handler; h != nil {
		if _, err := f("action.handler.args", string(h.Args), nil); err != nil {
			return err
		}
	}
	return nil
}

// userinfoBounds returns where the userinfo of raw starts and where its
// "@" is (start == at when there is none).
func userinfoBounds(raw string) (start, at int) {
	i := strings.Index(raw, "://")
	if i <= 0 {
		return 0, 0
	}
	start = i + 3
	end := len(raw)
	if j := strings.IndexAny(raw[start:], "/?#"); j >= 0 {
		end = start + j
	}
	k := strings.LastIndexByte(raw[start:end], '@')
	if k < 0 {
		return start, start
	}
	return start, start + k
}

// encodeUserinfo percent-encodes v for the user or password of a URL.
func encodeUserinfo(v string) string {
	return strings.TrimPrefix(url.UserPassword("", v).String(), ":")
}

// ScrubSecrets returns s with each of values replaced by Redacted: what a
// run shows (its output, its error, its request) never quotes an app
// secret it was given.
func ScrubSecrets(s string, values []string) string {
	for _, v := range values {
		if len(v) >= 4 && strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Redacted)
		}
	}
	return s
}

// PlaceholdAppSecretRefs returns s with each app secret reference replaced
// by the text "secret", for checks of the form of s (a URL that parses).
func PlaceholdAppSecretRefs(s string) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	return secretRefPattern.ReplaceAllString(s, "secret")
}
