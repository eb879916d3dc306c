package chime_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chimehq/chime"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/nodeparts"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

func httpAction(url string) model.Action {
	return model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{Method: "POST", URL: url, Body: "ping"}}
}

// TestLibraryCallbackSigned: a timer made through the Go library has no
// secret until its first callback, which creates one and is signed with it.
func TestLibraryCallbackSigned(t *testing.T) {
	type delivery struct {
		h    http.Header
		body []byte
	}
	got := make(chan delivery, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case got <- delivery{r.Header.Clone(), b}:
		default:
		}
	}))
	defer recv.Close()
	n := newNode(t, chime.Config{App: "lib"})
	start(t, n)
	ctx := context.Background()
	id, err := n.Upsert(ctx, chime.Timer{Name: "cb", Schedule: at(200 * time.Millisecond), Action: httpAction(recv.URL)})
	if err != nil {
		t.Fatal(err)
	}
	if r := waitRun(t, n, id, 10*time.Second); r.Status != model.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	d := <-got
	ss, err := nodeparts.Of(n).Store.ActiveSigningSecrets(ctx, "lib", time.Now())
	if err != nil || len(ss) != 1 {
		t.Fatalf("secrets: %v, %v", ss, err)
	}
	if err := webhook.Verify(ss[0].Secret, d.h, d.body); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// TestLibraryEgress: the node's policy refuses a literal denied URL at
// Upsert, and a name that resolves to a denied address when it fires.
func TestLibraryEgress(t *testing.T) {
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer recv.Close()
	strict, err := egress.NewPolicy([]string{"127.0.0.0/8"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t, chime.Config{Security: chime.SecurityConfig{Egress: strict}})
	start(t, n)
	ctx := context.Background()
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", recv.URL} {
		_, err := n.Upsert(ctx, chime.Timer{Name: "meta", Schedule: "@every 1h", Action: httpAction(u)})
		if err == nil || !strings.Contains(err.Error(), "action.http.url") || !strings.Contains(err.Error(), "egress policy") {
			t.Fatalf("Upsert %s: %v", u, err)
		}
	}
	// localhost is a name: accepted, refused when it resolves.
	id, err := n.Upsert(ctx, chime.Timer{Name: "local", Schedule: at(200 * time.Millisecond),
		Action: httpAction(strings.Replace(recv.URL, "127.0.0.1", "localhost", 1))})
	if err != nil {
		t.Fatal(err)
	}
	if r := waitRun(t, n, id, 10*time.Second); r.Status != model.RunFailed || !strings.Contains(r.Error, "egress policy") {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
}
