package action

import (
	"context"
	"fmt"

	"github.com/chimehq/chime/model"
)

// appSecretsKey marks, in an action's context, a request that carries app
// secrets: HTTPRunner then follows no redirect to another host.
type appSecretsKey struct{}

// WithAppSecrets returns a context, derived from ctx, for an action whose
// app secret references were put in (ResolveAppSecrets used some): the
// HTTP runner then follows no redirect to another host.
func WithAppSecrets(ctx context.Context) context.Context {
	return context.WithValue(ctx, appSecretsKey{}, true)
}

// AppSecretStore is what ResolveAppSecrets reads of the store: an app's
// secrets, with their values (store.Store implements it).
type AppSecretStore interface {
	AppSecrets(ctx context.Context, app string) ([]*model.AppSecret, error)
}

// ResolveAppSecrets returns t, or, when its action refers to app secrets
// ({{secret.NAME}}), a copy of t whose action has their values put in,
// read from st, with the values. It fails, and nothing is to be sent, when
// a reference names no secret of t's app or the action goes where the
// secret may not be sent (model.Action.ResolveAppSecrets).
func ResolveAppSecrets(ctx context.Context, st AppSecretStore, t *model.Timer) (*model.Timer, []string, error) {
	if !t.Action.HasAppSecretRefs() {
		return t, nil, nil
	}
	all, err := st.AppSecrets(ctx, t.App)
	if err != nil {
		return nil, nil, fmt.Errorf("app secrets of %s: %w", t.App, err)
	}
	byName := make(map[string]*model.AppSecret, len(all))
	for _, s := range all {
		byName[s.Name] = s
	}
	c := *t
	c.Action = t.Action.Clone()
	used, err := c.Action.ResolveAppSecrets(byName)
	if err != nil {
		return nil, nil, fmt.Errorf("app secrets: nothing sent: %w", err)
	}
	return &c, used, nil
}

// scrubbedError is an error whose message has app secret values
// Redacted; it unwraps to the original.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// ScrubAppSecrets removes the values of used (ResolveAppSecrets' values)
// from what a run records: its output, its error and its request, which
// it changes in place.
func ScrubAppSecrets(used []string, out []byte, err error, sent *model.SentRequest) ([]byte, error) {
	if len(used) == 0 {
		return out, err
	}
	out = []byte(model.ScrubSecrets(string(out), used))
	if err != nil {
		if msg := model.ScrubSecrets(err.Error(), used); msg != err.Error() {
			err = &scrubbedError{msg: msg, err: err}
		}
	}
	if sent != nil {
		sent.URL = model.ScrubSecrets(sent.URL, used)
		sent.Body = model.ScrubSecrets(sent.Body, used)
		for k, v := range sent.Header {
			sent.Header[k] = model.ScrubSecrets(v, used)
		}
		for k, v := range sent.Env {
			sent.Env[k] = model.ScrubSecrets(v, used)
		}
	}
	return out, err
}
