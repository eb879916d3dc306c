package model

import (
	"encoding/json"
	"net/http"
)

// SentRequest is what one attempt of a run sent, as the executor made it
// (not the timer's current action, which may have changed since): for an
// HTTP action the method, URL, every header (chime's and the signature's
// included) and body; for a handler its name and arguments; for a shell
// action its command and arguments. Secret values are Redacted: the
// action's secret headers (HTTPAction.IsSecretHeader), a URL's password,
// and a shell action's environment, of which only the names are kept.
type SentRequest struct {
	Type   string            `json:"type"`
	Method string            `json:"method,omitempty"`
	URL    string            `json:"url,omitempty"`
	Header map[string]string `json:"header,omitempty"`
	Body   string            `json:"body,omitempty"`
	// Handler and Args: a handler action.
	Handler string          `json:"handler,omitempty"`
	Args    json.RawMessage `json:"args,omitempty"`
	// Command, CommandArgs, Env (names only, values Redacted) and Dir: a
	// shell action.
	Command     string            `json:"command,omitempty"`
	CommandArgs []string          `json:"command_args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Dir         string            `json:"dir,omitempty"`
}

// MaxRequestBody is the most bytes of an HTTP request's body that a
// SentRequest keeps.
const MaxRequestBody = 16 << 10

// SentHTTP returns the SentRequest of an HTTP request made for a (whose
// secret headers it redacts) with header hdr and body.
func SentHTTP(a *HTTPAction, method, url string, hdr http.Header, body string) *SentRequest {
	r := &SentRequest{Type: ActionHTTP, Method: method, URL: RedactURL(url), Body: Cut(body, MaxRequestBody)}
	if len(hdr) > 0 {
		r.Header = make(map[string]string, len(hdr))
		for k, vs := range hdr {
			v := ""
			if len(vs) > 0 {
				v = vs[0]
			}
			if a != nil && v != "" && a.IsSecretHeader(k) {
				v = Redacted
			}
			r.Header[k] = v
		}
	}
	return r
}

// SentOf returns the SentRequest of action a as it is, for the action
// types whose request is the action itself (handler and shell), and for an
// HTTP action whose runner did not record what it sent (its headers then
// are the action's only).
func SentOf(a Action) *SentRequest {
	switch {
	case a.HTTP != nil:
		h := make(http.Header, len(a.HTTP.Header))
		for k, v := range a.HTTP.Header {
			h.Set(k, v)
		}
		return SentHTTP(a.HTTP, a.HTTP.Method, a.HTTP.URL, h, a.HTTP.Body)
	case a.Handler != nil:
		args := a.Handler.Args
		if len(a.Handler.SecretArgs) > 0 {
			r := a.Clone()
			r.Redact()
			args = r.Handler.Args
		}
		return &SentRequest{Type: ActionHandler, Handler: a.Handler.Name, Args: args}
	case a.Shell != nil:
		r := &SentRequest{Type: ActionShell, Command: a.Shell.Command, CommandArgs: a.Shell.Args, Dir: a.Shell.Dir}
		if len(a.Shell.Env) > 0 {
			r.Env = make(map[string]string, len(a.Shell.Env))
			for k := range a.Shell.Env {
				r.Env[k] = Redacted
			}
		}
		return r
	}
	return &SentRequest{Type: a.Type}
}

// RedactURL returns raw with the password of its user information, if
// any, Redacted.
func RedactURL(raw string) string {
	p, ok := splitURL(raw)
	if !ok || p.password() == "" {
		return raw
	}
	return p.withPassword(Redacted)
}

// Cut returns s cut to at most n bytes, at a rune boundary.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
