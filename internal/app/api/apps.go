package api

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/chimehq/chime/internal/timers"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

// appsAPI serves the settings of an app (/api/v1/apps/{app}/...): its
// signing secret (apps.go), its notify rules (apps.go) and its secrets
// (appsecrets.go), and checks a timer's references to those secrets
// (checkAppSecretRefs). The pause and resume of an app's timers are
// actionsAPI's (batch.go).
type appsAPI struct {
	*env
	store   SecurityStore
	overlap time.Duration // of rotated signing secrets
	// rotating is Config.RotatingSecrets.
	rotating func(app string) (done func())
	// emailAllowed is Config.EmailAllowed.
	emailAllowed func(address string) error
}

// DefaultSigningOverlap is how long a rotated signing secret keeps signing
// beside the new one when Config.SigningOverlap is zero: a day for
// receivers to switch to the new secret.
const DefaultSigningOverlap = 24 * time.Hour

// MaxSigningOverlap is the longest overlap a rotation may ask for.
const MaxSigningOverlap = 30 * 24 * time.Hour

// SigningSecret is the answer of GET /api/v1/apps/{app}/signing-secret and
// of its rotate route: the app's newest secret, which receivers should
// verify with, and every secret that still signs the app's callbacks.
type SigningSecret struct {
	App string `json:"app"`
	// Secret is the newest secret, "whsec_" and the base64 of the key.
	Secret    string    `json:"secret"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	// Active lists the secrets that sign, the newest (the one above)
	// first; older ones sign until their expires_at.
	Active []SigningSecretVersion `json:"active"`
}

// SigningSecretVersion is one version of an app's signing secret.
type SigningSecretVersion struct {
	Version   int       `json:"version"`
	Secret    string    `json:"secret"`
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the secret stops signing; absent: it does not.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// RotateRequest is the optional body of POST
// /api/v1/apps/{app}/signing-secret/rotate.
type RotateRequest struct {
	// Overlap is how long the secrets signing now keep signing beside the
	// new one, a Go duration; absent: the server's --signing-overlap. "0s"
	// stops them at once (for a secret that leaked).
	Overlap *string `json:"overlap,omitempty"`
}

func signingSecretFrom(app string, ss []*model.SigningSecret) *SigningSecret {
	out := &SigningSecret{App: app, Active: make([]SigningSecretVersion, 0, len(ss))}
	for i, s := range ss {
		v := SigningSecretVersion{Version: s.Version, Secret: s.Secret, CreatedAt: s.CreatedAt.UTC()}
		if !s.ExpiresAt.IsZero() {
			e := s.ExpiresAt.UTC()
			v.ExpiresAt = &e
		}
		out.Active = append(out.Active, v)
		if i == 0 {
			out.Secret, out.Version, out.CreatedAt = v.Secret, v.Version, v.CreatedAt
		}
	}
	return out
}

// appParam returns the {app} path value, answering 400 on field app when
// it is not a valid app name.
func appParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	app := r.PathValue("app")
	if err := timers.ValidateIdent("app", app); err != nil {
		fe, _ := fieldError(err)
		writeError(w, http.StatusBadRequest, fe.Field, fe.Message)
		return "", false
	}
	return app, true
}

// getSigningSecret answers the app's signing secrets. An app that has
// none yet (no timer was made through the API) gets its first one, so
// that a receiver can be set up before the app's first timer.
func (s *appsAPI) getSigningSecret(w http.ResponseWriter, r *http.Request) {
	app, ok := appParam(w, r)
	if !ok {
		return
	}
	now := s.now().UTC()
	ss, err := s.store.ActiveSigningSecrets(r.Context(), app, now)
	if err == nil && len(ss) == 0 {
		if _, err = s.store.EnsureSigningSecret(r.Context(), app, webhook.NewSecret(), now); err == nil {
			ss, err = s.store.ActiveSigningSecrets(r.Context(), app, now)
		}
	}
	if err == nil && len(ss) == 0 {
		err = fmt.Errorf("app %s: no signing secret after creating one", app)
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store") // a secret
	writeJSON(w, http.StatusOK, signingSecretFrom(app, ss))
}

// rotateSigningSecret makes a new signing secret for the app; the ones
// signing now keep signing for the overlap.
func (s *appsAPI) rotateSigningSecret(w http.ResponseWriter, r *http.Request) {
	app, ok := appParam(w, r)
	if !ok {
		return
	}
	overlap := s.overlap
	if hasBody(r) {
		var in RotateRequest
		if rerr := s.decodeJSON(w, r, &in); rerr != nil {
			writeError(w, rerr.code, rerr.field, rerr.message)
			return
		}
		if in.Overlap != nil {
			d, err := time.ParseDuration(*in.Overlap)
			if err != nil || d < 0 || d > MaxSigningOverlap {
				writeError(w, http.StatusBadRequest, "overlap", fmt.Sprintf("must be a Go duration from 0s to %s", MaxSigningOverlap))
				return
			}
			overlap = d
		}
	}
	now := s.now().UTC()
	if s.rotating != nil {
		// This node's callbacks read the secrets from the store until
		// the rotation committed, and sign with each active one after.
		defer s.rotating(app)()
	}
	sec, err := s.store.RotateSigningSecret(r.Context(), app, webhook.NewSecret(), now, now.Add(overlap))
	if errors.Is(err, model.ErrConflict) {
		writeError(w, http.StatusConflict, "", "another rotation of this app's secret happened at the same time; read the secret again")
		return
	}
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	s.audit(r, "secret.rotate", app, app, fmt.Sprintf("version %d; older versions sign until %s", sec.Version, now.Add(overlap).Format(time.RFC3339)))
	ss, err := s.store.ActiveSigningSecrets(r.Context(), app, now)
	if err != nil || len(ss) == 0 || ss[0].Version != sec.Version {
		// A rotation raced ours after it; answer the secret we made.
		ss = []*model.SigningSecret{sec}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, signingSecretFrom(app, ss))
}

// AppNotify is the body and the answer of /api/v1/apps/{app}/notify: the
// app's default notification rules, which apply to its timers that set
// no notify of their own (docs/workflows.md).
type AppNotify struct {
	App    string             `json:"app"`
	Notify []model.NotifyRule `json:"notify"`
}

// getAppNotify answers the app's default notification rules.
func (s *appsAPI) getAppNotify(w http.ResponseWriter, r *http.Request) {
	app, ok := appParam(w, r)
	if !ok {
		return
	}
	rules, err := s.store.AppNotify(r.Context(), app)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, AppNotify{App: app, Notify: model.RedactNotify(rules)})
}

// putAppNotify replaces the app's default notification rules; an empty
// list removes them.
func (s *appsAPI) putAppNotify(w http.ResponseWriter, r *http.Request) {
	app, ok := appParam(w, r)
	if !ok {
		return
	}
	var in AppNotify
	if rerr := s.decodeJSON(w, r, &in); rerr != nil {
		writeError(w, rerr.code, rerr.field, rerr.message)
		return
	}
	if in.App != "" && in.App != app {
		writeError(w, http.StatusBadRequest, "app", fmt.Sprintf("%q differs from the URL's app %q", in.App, app))
		return
	}
	// Webhook URLs are secrets: a redacted one keeps the stored URL of
	// the same rule.
	stored, err := s.store.AppNotify(r.Context(), app)
	if err != nil {
		s.serverError(w, r, err)
		return
	}
	if err := model.KeepNotifySecrets("notify", in.Notify, stored); err != nil {
		writeValidationError(w, err)
		return
	}
	if err := timers.ValidateNotify("notify", in.Notify, s.emailAllowed); err != nil {
		fe, _ := fieldError(err)
		writeError(w, http.StatusBadRequest, fe.Field, fe.Message)
		return
	}
	if in.Notify == nil {
		in.Notify = []model.NotifyRule{}
	}
	if err := s.store.SetAppNotify(r.Context(), app, in.Notify, s.now().UTC()); err != nil {
		s.serverError(w, r, err)
		return
	}
	s.audit(r, "app.notify", app, app, fmt.Sprintf("%d default notification rules", len(in.Notify)))
	writeJSON(w, http.StatusOK, AppNotify{App: app, Notify: model.RedactNotify(in.Notify)})
}
