package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/chimehq/chime/model"
)

// Secrets kept per app (model.AppSecret): PUT, GET and DELETE under
// /api/v1/apps/{app}/secrets. Values are write-only.

// AppSecretRequest is the body of PUT /api/v1/apps/{app}/secrets/{name}.
type AppSecretRequest struct {
	// Value is the secret, write-only: no answer shows it.
	Value *string `json:"value"`
	// Hosts are the URL host names (without port) of the HTTP actions
	// that may be sent the secret.
	Hosts []string `json:"hosts,omitempty"`
	// Commands are the shell commands, as the actions name them, that may
	// be given the secret.
	Commands []string `json:"commands,omitempty"`
}

// AppSecret is one app secret as the API answers it: never its value.
type AppSecret struct {
	Name      string    `json:"name"`
	Hosts     []string  `json:"hosts"`
	Commands  []string  `json:"commands"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// AppSecrets is the answer of GET /api/v1/apps/{app}/secrets.
type AppSecrets struct {
	App     string      `json:"app"`
	Secrets []AppSecret `json:"secrets"`
}

// Bounds of an app secret's lists.
const (
	MaxAppSecretHosts    = 100
	MaxAppSecretCommands = 100
)

func appSecretFrom(s *model.AppSecret) AppSecret {
	return AppSecret{Name: s.Name, Hosts: nonNilStrings(s.Hosts), Commands: nonNilStrings(s.Commands),
		CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}
}

func nonNilStrings(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// appSecretName returns the {name} path value, answering 400 on field name
// when it cannot name an app secret.
func appSecretName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if !model.ValidAppSecretName(name) {
		writeError(w, http.StatusBadRequest, "name", fmt.Sprintf("%q is not a secret name: a letter or underscore, then letters, digits and underscores, 64 at most", name))
		return "", false
	}
	return name, true
}

// secretHost is what a host of an app secret looks like: a host name or
// an IP address, without scheme, port or path.
var secretHost = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,253}$`)

// validAppSecret checks a PUT body, answering 400 on the first bad field.
func validAppSecret(w http.ResponseWriter, in *AppSecretRequest) bool {
	bad := func(field, format string, args ...any) bool {
		writeError(w, http.StatusBadRequest, field, fmt.Sprintf(format, args...))
		return false
	}
	switch {
	case in.Value == nil || *in.Value == "":
		return bad("value", "is required")
	case len(*in.Value) > model.MaxAppSecretValue:
		return bad("value", "is longer than %d bytes", model.MaxAppSecretValue)
	case strings.HasPrefix(*in.Value, "enc:v1:"):
		// It would read as an encrypted value (sqlstore.SealedPrefix).
		return bad("value", "may not start with %q", "enc:v1:")
	case len(in.Hosts) == 0 && len(in.Commands) == 0:
		return bad("hosts", "give at least one host (or shell command, in commands) the secret may be sent to")
	case len(in.Hosts) > MaxAppSecretHosts:
		return bad("hosts", "lists more than %d hosts", MaxAppSecretHosts)
	case len(in.Commands) > MaxAppSecretCommands:
		return bad("commands", "lists more than %d commands", MaxAppSecretCommands)
	}
	for i, h := range in.Hosts {
		if !secretHost.MatchString(h) {
			return bad(fmt.Sprintf("hosts[%d]", i), "%q is not a host name: give the host of the URL alone, without scheme, port or path", h)
		}
		in.Hosts[i] = strings.ToLower(h)
	}
	for i, c := range in.Commands {
		if strings.TrimSpace(c) == "" || strings.ContainsRune(c, 0) || len(c) > 4096 {
			return bad(fmt.Sprintf("commands[%d]", i), "must be a command as shell actions name it")
		}
	}
	return true
}

// putAppSecret creates or replaces an app secret.
func (s *appsAPI) putAppSecret(w http.ResponseWriter, r *http.Request) {
	app, ok := appParam(w, r)
	if !ok {
		return
	}
	name, ok := appSecretName(w, r)
	if !ok {
		return
	}
	var in AppSecretRequest
	if rerr := s.decodeJSON(w, r, &in); rerr != nil {
		writeError(w, rerr.code, rerr.field, rerr.message)
		return
	}
	if !validAppSecret(w, &in) {
		return
	}
	now := s.now().UTC()
	sec := &model.AppSecret{App: app, Name: name, Value: *in.Value, Hosts: nonNilStrings(in.Hosts),
		Commands: nonNilStrings(in.Commands), CreatedAt: now, UpdatedAt: now}
	if err := s.store.PutAppSecret(r.Context(), sec); err != nil {
		s.serverError(w, r, err)
		return
	}
	s.audit(r, "app_secret.set", app, app+"/"+name,
		fmt.Sprintf("hosts: %s; commands: %s", listOrNone(sec.Hosts), listOrNone(sec.Commands)))
	all, err := s.store.AppSecrets(r.Context(), app)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	for _, a := range all {
		if a.Name == name {
			sec = a
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, appSecretFrom(sec))
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// listAppSecrets answers an app's secrets: names, hosts, commands and
// dates, never values.
func (s *appsAPI) listAppSecrets(w http.ResponseWriter, r *http.Request) {
	app, ok := appParam(w, r)
	if !ok {
		return
	}
	all, err := s.store.AppSecrets(r.Context(), app)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	out := AppSecrets{App: app, Secrets: make([]AppSecret, 0, len(all))}
	for _, a := range all {
		out.Secrets = append(out.Secrets, appSecretFrom(a))
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteAppSecret deletes an app secret. Timers that refer to it fail
// their runs from then on (and are refused when saved) until it is set
// again.
func (s *appsAPI) deleteAppSecret(w http.ResponseWriter, r *http.Request) {
	app, ok := appParam(w, r)
	if !ok {
		return
	}
	name, ok := appSecretName(w, r)
	if !ok {
		return
	}
	err := s.store.DeleteAppSecret(r.Context(), app, name)
	if errors.Is(err, model.ErrNotFound) {
		writeError(w, http.StatusNotFound, "", fmt.Sprintf("app %s has no secret %q", app, name))
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.audit(r, "app_secret.delete", app, app+"/"+name, "")
	w.WriteHeader(http.StatusNoContent)
}

// checkAppSecretRefs checks the {{secret.NAME}} references of t's action
// against the secrets of t's app: each must be well placed, exist and be
// allowed to go where the action sends it (see
// model.Action.ResolveAppSecrets, which the executor applies when the
// action runs). It returns a *model.FieldError for the first that is not.
func (s *appsAPI) checkAppSecretRefs(ctx context.Context, t *model.Timer) error {
	if !t.Action.HasAppSecretRefs() {
		return nil
	}
	refs, err := t.Action.AppSecretRefs()
	if err != nil {
		return err
	}
	all, err := s.store.AppSecrets(ctx, t.App)
	if err != nil {
		return fmt.Errorf("app secrets of %s: %w", t.App, err)
	}
	byName := make(map[string]*model.AppSecret, len(all))
	for _, a := range all {
		byName[a.Name] = a
	}
	for _, ref := range refs {
		sec := byName[ref.Name]
		if sec == nil {
			return model.Errorf(ref.Field, "refers to app secret %q, which app %s does not have (PUT /api/v1/apps/%s/secrets/%s)", ref.Name, t.App, t.App, ref.Name)
		}
		if err := t.Action.AppSecretAllowed(ref.Field, sec); err != nil {
			return err
		}
	}
	return nil
}
