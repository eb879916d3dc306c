package action

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chimehq/chime/model"
)

// appSecretsFunc is an AppSecretStore made of a function.
type appSecretsFunc func(ctx context.Context, app string) ([]*model.AppSecret, error)

func (f appSecretsFunc) AppSecrets(ctx context.Context, app string) ([]*model.AppSecret, error) {
	return f(ctx, app)
}

// TestResolveTimerAppSecrets: an action without references is returned as it
// is, without reading the store; one with references gets their values in
// a copy, the timer itself unchanged; a reference the app's secrets do not
// allow, or a store that cannot be read, fails with nothing to send.
func TestResolveTimerAppSecrets(t *testing.T) {
	t.Parallel()
	const value = "v4lue-of-API"
	secrets := []*model.AppSecret{{App: "a", Name: "API", Value: value, Hosts: []string{"receiver.test"}}}
	timer := func(url, header string) *model.Timer {
		return &model.Timer{ID: "t1", App: "a", Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{
			Method: "POST", URL: url, Header: map[string]string{"X-Key": header}}}}
	}
	tests := []struct {
		name     string
		t        *model.Timer
		storeErr error
		wantKey  string // the X-Key header put in; "" for an error
		wantErr  string
	}{
		{name: "no references", t: timer("http://receiver.test/hook", "plain"), storeErr: errors.New("not read"), wantKey: "plain"},
		{name: "resolved", t: timer("http://receiver.test/hook", "k {{secret.API}}"), wantKey: "k " + value},
		{name: "missing secret", t: timer("http://receiver.test/hook", "{{secret.NOPE}}"),
			wantErr: `app secrets: nothing sent: action.http.header.X-Key: app secret "NOPE" does not exist`},
		{name: "other host", t: timer("http://elsewhere.test/hook", "{{secret.API}}"), wantErr: "nothing sent"},
		{name: "store down", t: timer("http://receiver.test/hook", "{{secret.API}}"), storeErr: errors.New("store down"),
			wantErr: "app secrets of a: store down"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := appSecretsFunc(func(ctx context.Context, app string) ([]*model.AppSecret, error) {
				if tc.storeErr != nil {
					return nil, tc.storeErr
				}
				return secrets, nil
			})
			before := tc.t.Action.HTTP.Header["X-Key"]
			got, used, err := ResolveAppSecrets(t.Context(), st, tc.t)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != nil {
					t.Fatalf("got %v, %v; want the error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k := got.Action.HTTP.Header["X-Key"]; k != tc.wantKey {
				t.Errorf("X-Key = %q, want %q", k, tc.wantKey)
			}
			if tc.t.Action.HTTP.Header["X-Key"] != before {
				t.Errorf("the timer's own action changed: %q", tc.t.Action.HTTP.Header["X-Key"])
			}
			if resolved := tc.wantKey != before; resolved != (len(used) == 1 && used[0] == value) || !resolved && got != tc.t {
				t.Errorf("used %q, same timer %v", used, got == tc.t)
			}
		})
	}
}

// TestScrubAppSecrets: what a run records — output, error, request — has
// the values used replaced; the error still unwraps to the runner's.
func TestScrubAppSecrets(t *testing.T) {
	t.Parallel()
	const value = "s3cret-value"
	cause := errors.New("refused key " + value)
	sent := &model.SentRequest{URL: "http://u:" + value + "@h/", Body: "b " + value,
		Header: map[string]string{"X-Key": value}, Env: map[string]string{"K": value}}
	out, err := ScrubAppSecrets([]string{value}, []byte("echo "+value), cause, sent)
	for what, s := range map[string]string{"output": string(out), "error": err.Error(), "url": sent.URL, "body": sent.Body,
		"header": sent.Header["X-Key"], "env": sent.Env["K"]} {
		if strings.Contains(s, value) || !strings.Contains(s, model.Redacted) {
			t.Errorf("%s = %q, want the value redacted", what, s)
		}
	}
	if !errors.Is(err, cause) {
		t.Errorf("error %v does not unwrap to the runner's", err)
	}
	if out, err := ScrubAppSecrets(nil, []byte("x"), cause, nil); string(out) != "x" || err != cause {
		t.Errorf("without values: %q, %v; want them unchanged", out, err)
	}
}

// TestAppSecretsNoRedirectOffHost: a callback that carries app secrets
// (WithAppSecrets) follows no redirect to another host; one without them
// does.
func TestAppSecretsNoRedirectOffHost(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+"/next", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	r := NewHTTPRunner()
	tm := &model.Timer{ID: "t1", App: "a", Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "GET", URL: srv.URL}}}
	run := &model.Run{ID: "r1", TimerID: "t1", Attempt: 1}
	if _, err := r.Run(WithAppSecrets(t.Context()), run, tm); err == nil || !strings.Contains(err.Error(), "not followed") {
		t.Errorf("with app secrets: %v, want the redirect not followed", err)
	}
	if _, err := r.Run(t.Context(), run, tm); err != nil {
		t.Errorf("without app secrets: %v, want the redirect followed", err)
	}
}
