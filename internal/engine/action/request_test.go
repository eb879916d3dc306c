package action

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime/model"
)

// TestHTTPRecordsRequest: the HTTP runner records what it sent, chime's
// headers included, secret headers and the URL's password redacted.
func TestHTTPRecordsRequest(t *testing.T) {
	t.Parallel()
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Set-Cookie", "sid=c00kie")
		w.Header().Set("X-Upload-Token", "t0ken")
		w.Header().Set("X-Request-Id", "req-7")
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1) + "/hook?x=1"
	tm := &model.Timer{ID: "tmr_1", App: "a", Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{
		Method: "PUT", URL: u, Body: `{"a":1}`, SecretHeaders: []string{"X-Token"},
		Header: map[string]string{"Authorization": "Bearer s3cret", "X-Token": "t0ken", "X-Plain": "visible"}}}}
	run := &model.Run{ID: "run_1", TimerID: "tmr_1", Attempt: 2, Node: "n1", ScheduledAt: time.Now()}
	var notes Notes
	ctx := WithNotes(t.Context(), &notes)
	if _, err := (&HTTPRunner{Client: srv.Client()}).Run(ctx, run, tm); err != nil {
		t.Fatal(err)
	}
	sent := notes.Sent
	if notes.Status != http.StatusAccepted || notes.Header["X-Request-Id"] != "req-7" ||
		notes.Header["Set-Cookie"] != model.Redacted || notes.Header["X-Upload-Token"] != model.Redacted {
		t.Errorf("recorded response %d %v, want 202 with X-Request-Id and the secret-named headers redacted", notes.Status, notes.Header)
	}
	if got.Get("Authorization") != "Bearer s3cret" {
		t.Fatalf("receiver got %v: the request itself is not redacted", got)
	}
	if sent == nil {
		t.Fatal("no request recorded")
	}
	b, _ := json.Marshal(sent)
	for _, secret := range []string{"s3cret", "t0ken", "hunter2"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("recorded request %s holds the secret %q", b, secret)
		}
	}
	h := sent.Header
	if sent.Type != "http" || sent.Method != "PUT" || !strings.HasSuffix(sent.URL, "/hook?x=1") || sent.Body != `{"a":1}` ||
		h["Authorization"] != model.Redacted || h["X-Token"] != model.Redacted || h["X-Plain"] != "visible" ||
		h["X-Chime-Attempt"] != "2" || h["X-Chime-Run-Id"] != "run_1" || h["User-Agent"] != "chime" {
		t.Errorf("recorded request = %s", b)
	}
	if !strings.Contains(sent.URL, "user:%3Credacted%3E@") {
		t.Errorf("recorded URL %q: want its password redacted", sent.URL)
	}
}

// TestSentOf: the request of a handler or shell action is the action, a
// shell action's environment values redacted.
func TestSentOf(t *testing.T) {
	t.Parallel()
	h := model.SentOf(model.Action{Type: "handler", Handler: &model.HandlerAction{Name: "report", Args: json.RawMessage(`{"n":1}`)}})
	if h.Type != "handler" || h.Handler != "report" || string(h.Args) != `{"n":1}` {
		t.Errorf("handler request = %+v", h)
	}
	s := model.SentOf(model.Action{Type: "shell", Shell: &model.ShellAction{Command: "tar", Args: []string{"czf", "x"}, Env: map[string]string{"PW": "secret"}}})
	if s.Type != "shell" || s.Command != "tar" || strings.Join(s.CommandArgs, " ") != "czf x" || s.Env["PW"] != model.Redacted {
		t.Errorf("shell request = %+v", s)
	}
}
