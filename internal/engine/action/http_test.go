package action_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clockpkg "github.com/chimehq/chime/internal/base/clock"
	"github.com/chimehq/chime/internal/base/egress"
	"github.com/chimehq/chime/internal/engine/action"
	"github.com/chimehq/chime/model"
	"github.com/chimehq/chime/webhook"
)

// testResolver resolves names from a map, and nothing else: the tests
// never ask the real DNS.
type testResolver map[string][]netip.Addr

func (m testResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

var resolver = testResolver{
	"metadata.test": {netip.MustParseAddr("169.254.169.254")},
	"receiver.test": {netip.MustParseAddr("127.0.0.1")},
	// What a libc resolver makes of a decimal "address" (169.254.169.254):
	// the policy judges the address, whatever the name looked like.
	"2852039166":  {netip.MustParseAddr("169.254.169.254")},
	"mapped.test": {netip.MustParseAddr("::ffff:169.254.169.254")},
}

func httpTimer(app, u string) *model.Timer {
	return &model.Timer{ID: "tmr_1", App: app, Name: "t", Action: model.Action{Type: model.ActionHTTP,
		HTTP: &model.HTTPAction{Method: "POST", URL: u, Body: `{"hello":"world"}`}}}
}

func testRun() *model.Run {
	return &model.Run{ID: "run_1", TimerID: "tmr_1", Attempt: 1, Node: "n1", ScheduledAt: time.Now()}
}

func mustPolicy(t *testing.T, deny, allow []string) *egress.Policy {
	t.Helper()
	p, err := egress.NewPolicy(deny, allow)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHTTPEgress(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(ok.Close)
	okURL, _ := url.Parse(ok.URL)
	port := okURL.Port()
	redirect := func(to string) string {
		srv := httptest.NewServer(http.RedirectHandler(to, http.StatusFound))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	strict := mustPolicy(t, []string{"127.0.0.0/8"}, nil)
	strictAllow := mustPolicy(t, []string{"127.0.0.0/8"}, []string{"127.0.0.1/32"})
	allowMeta := mustPolicy(t, nil, []string{"169.254.0.0/16"})
	for _, tc := range []struct {
		name   string
		policy *egress.Policy
		url    string
		want   string // error substring; "" succeeds; "!egress" fails otherwise
	}{
		{"allowed receiver", nil, ok.URL, ""},
		{"allowed receiver by name", nil, "http://receiver.test:" + port + "/", ""},
		{"metadata literal", nil, "http://169.254.169.254/latest/meta-data", "egress policy: 169.254.169.254:80 is denied (in 169.254.0.0/16)"},
		{"metadata mapped", nil, "http://[::ffff:169.254.169.254]/latest/meta-data", "egress policy: 169.254.169.254:80 is denied"},
		{"name resolving to metadata", nil, "http://metadata.test/latest/meta-data", "egress policy: 169.254.169.254:80 (metadata.test) is denied"},
		{"decimal name resolving to metadata", nil, "http://2852039166/latest/meta-data", "egress policy: 169.254.169.254:80 (2852039166) is denied"},
		{"name resolving to a mapped address", nil, "http://mapped.test/", "egress policy: 169.254.169.254:80 (mapped.test) is denied"},
		{"redirect to metadata literal", nil, redirect("http://169.254.169.254/latest/meta-data"), "egress policy: 169.254.169.254:80 is denied"},
		{"redirect to metadata name", nil, redirect("http://metadata.test:8080/x"), "egress policy: 169.254.169.254:8080 (metadata.test) is denied"},
		{"redirect to allowed", nil, redirect(ok.URL + "/next"), ""},
		{"loopback denied by the operator", strict, ok.URL, "egress policy: 127.0.0.1:" + port + " is denied (in 127.0.0.0/8)"},
		{"allow wins over deny", strictAllow, ok.URL, ""},
		{"allow lets a default range through", allowMeta, "http://169.254.169.254:9/", "!egress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := action.NewHTTPRunnerWith(action.HTTPOptions{Egress: tc.policy, Resolver: resolver})
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			before := hits.Load()
			out, err := r.Run(ctx, testRun(), httpTimer("app", tc.url))
			switch {
			case tc.want == "":
				if err != nil || string(out) != "ok" {
					t.Fatalf("Run = %q, %v", out, err)
				}
			case tc.want == "!egress":
				// The connection was attempted (and fails: nothing
				// listens there), not refused by the policy.
				if err == nil || strings.Contains(err.Error(), "egress policy") {
					t.Fatalf("Run: %v, want a failure other than the egress policy", err)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Run: %v, want %q", err, tc.want)
				}
				var de *egress.DeniedError
				if !errors.As(err, &de) {
					t.Fatalf("Run: %v does not wrap *egress.DeniedError", err)
				}
				if strings.HasPrefix(tc.name, "loopback") && hits.Load() != before {
					t.Fatal("the denied receiver was called")
				}
			}
		})
	}
}

// TestHTTPNoProxy: callbacks ignore the environment's proxy, which would
// otherwise be the address the policy checks.
func TestHTTPNoProxy(t *testing.T) {
	r := action.NewHTTPRunner()
	if tr := r.Client.Transport.(*http.Transport); tr.Proxy != nil {
		t.Fatal("callback transport uses a proxy")
	}
}

// fixedSecrets is a SigningSecrets with fixed secrets.
type fixedSecrets []string

func (f fixedSecrets) SigningSecrets(ctx context.Context, app string) ([]string, error) {
	return f, nil
}

func TestHTTPSigned(t *testing.T) {
	t.Parallel()
	oldS, newS := webhook.NewSecret(), webhook.NewSecret()
	type got struct {
		h    http.Header
		body []byte
	}
	recv := make(chan got, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		recv <- got{r.Header.Clone(), b}
	}))
	defer srv.Close()
	at := time.Now()
	r := action.NewHTTPRunnerWith(action.HTTPOptions{Secrets: fixedSecrets{newS, oldS}, Clock: clockpkg.Func(func() time.Time { return at })})
	tm := httpTimer("billing", srv.URL)
	// A timer header cannot override the signature headers.
	tm.Action.HTTP.Header = map[string]string{"webhook-id": "forged", "X-Custom": "1"}
	if _, err := r.Run(t.Context(), testRun(), tm); err != nil {
		t.Fatal(err)
	}
	g := <-recv
	if g.h.Get("webhook-id") != "run_1" || g.h.Get("webhook-timestamp") != strconv.FormatInt(at.Unix(), 10) || g.h.Get("X-Custom") != "1" {
		t.Fatalf("headers %v", g.h)
	}
	if n := len(strings.Fields(g.h.Get("webhook-signature"))); n != 2 {
		t.Fatalf("%d signatures, want 2: %v", n, g.h.Get("webhook-signature"))
	}
	for _, s := range []string{oldS, newS} {
		if err := webhook.Verify(s, g.h, g.body); err != nil {
			t.Fatalf("verify: %v", err)
		}
	}
}

// TestHTTPUpstreamRunHeader: a run made by its upstreams' end sends
// X-Chime-Upstream-Run-ID; another run sends none, even when the timer's
// own headers name it.
func TestHTTPUpstreamRunHeader(t *testing.T) {
	t.Parallel()
	recv := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { recv <- r.Header.Clone() }))
	defer srv.Close()
	r := action.NewHTTPRunner()
	tm := httpTimer("billing", srv.URL)
	tm.Action.HTTP.Header = map[string]string{"x-chime-upstream-run-id": "forged"}
	for _, up := range []string{"", "run_0"} {
		run := testRun()
		run.UpstreamRunID = up
		if _, err := r.Run(t.Context(), run, tm); err != nil {
			t.Fatal(err)
		}
		h := <-recv
		if got := h.Values(model.HeaderUpstreamRunID); (up == "" && len(got) != 0) || (up != "" && (len(got) != 1 || got[0] != up)) {
			t.Errorf("upstream run %q: %s %q", up, model.HeaderUpstreamRunID, got)
		}
	}
}

// TestHTTPRerunHeaders: a rerun sends X-Chime-Rerun-Of and its original's
// scheduled instant as X-Chime-Scheduled-At; another run sends its own
// instant and no X-Chime-Rerun-Of, even when the timer's own headers name
// one.
func TestHTTPRerunHeaders(t *testing.T) {
	t.Parallel()
	recv := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { recv <- r.Header.Clone() }))
	defer srv.Close()
	r := action.NewHTTPRunner()
	tm := httpTimer("billing", srv.URL)
	tm.Action.HTTP.Header = map[string]string{"x-chime-rerun-of": "forged"}
	original := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	for _, of := range []string{"", "run_0"} {
		run := testRun()
		if of != "" {
			run.RerunOf, run.RerunScheduledAt = of, original
		}
		if _, err := r.Run(t.Context(), run, tm); err != nil {
			t.Fatal(err)
		}
		h := <-recv
		if got := h.Values(model.HeaderRerunOf); (of == "" && len(got) != 0) || (of != "" && (len(got) != 1 || got[0] != of)) {
			t.Errorf("rerun of %q: %s %q", of, model.HeaderRerunOf, got)
		}
		want := run.ScheduledAt.UTC().Format(time.RFC3339Nano)
		if of != "" {
			want = original.Format(time.RFC3339Nano)
		}
		if got := h.Get(model.HeaderScheduledAt); got != want {
			t.Errorf("rerun of %q: %s %q, want %q", of, model.HeaderScheduledAt, got, want)
		}
	}
}

// TestHTTPRedirectDropsSecrets: a redirect to another host gets none of
// the action's secret headers (net/http itself drops only Authorization
// and Cookie); a redirect on the same host keeps them.
func TestHTTPRedirectDropsSecrets(t *testing.T) {
	t.Parallel()
	seen := make(chan http.Header, 4)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/next", http.StatusFound)
			return
		}
		seen <- r.Header.Clone()
	}))
	t.Cleanup(target.Close)
	// The same receiver under another host name: 127.0.0.1 and
	// receiver.test are different hosts to the client.
	u, _ := url.Parse(target.URL)
	other := "http://receiver.test:" + u.Port()
	off := httptest.NewServer(http.RedirectHandler(other+"/landed", http.StatusFound))
	t.Cleanup(off.Close)

	r := action.NewHTTPRunnerWith(action.HTTPOptions{Resolver: resolver})
	for _, tc := range []struct {
		name, url string
		kept      bool
	}{
		{"same host", target.URL + "/start", true},
		{"other host", off.URL, false},
	} {
		tm := httpTimer("app", tc.url)
		tm.Action.HTTP.Header = map[string]string{"X-Api-Key": "k1", "X-Hub-Token": "k2", "Authorization": "Bearer k3", "X-Plain": "p"}
		tm.Action.HTTP.SecretHeaders = []string{"X-Hub-Token"}
		if _, err := r.Run(t.Context(), testRun(), tm); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		h := <-seen
		for _, k := range []string{"X-Api-Key", "X-Hub-Token", "Authorization"} {
			if got := h.Get(k) != ""; got != tc.kept {
				t.Errorf("%s: %s present = %v, want %v", tc.name, k, got, tc.kept)
			}
		}
		if h.Get("X-Plain") != "p" {
			t.Errorf("%s: a plain header was dropped", tc.name)
		}
	}
}

// TestHTTPScheduledAndDueAt: a callback carries the run's nominal instant
// and the instant the attempt was due (the jittered one), both RFC 3339 in
// UTC with nanoseconds.
func TestHTTPScheduledAndDueAt(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	t.Cleanup(srv.Close)
	sched := time.Date(2026, 6, 1, 12, 0, 0, 0, time.FixedZone("x", 7200))
	for _, tc := range []struct {
		name string
		due  time.Time
		want string
	}{
		{"jittered", sched.Add(12345 * time.Millisecond), "2026-06-01T10:00:12.345Z"},
		{"no due_at", time.Time{}, "2026-06-01T10:00:00Z"},
	} {
		run := testRun()
		run.ScheduledAt, run.DueAt = sched, tc.due
		if _, err := (&action.HTTPRunner{Client: srv.Client()}).Run(t.Context(), run, httpTimer("app", srv.URL)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		h := <-got
		if v := h.Get(model.HeaderScheduledAt); v != "2026-06-01T10:00:00Z" {
			t.Errorf("%s: %s = %q, want the nominal instant", tc.name, model.HeaderScheduledAt, v)
		}
		if v := h.Get(model.HeaderDueAt); v != tc.want {
			t.Errorf("%s: %s = %q, want %q", tc.name, model.HeaderDueAt, v, tc.want)
		}
	}
}

// closingReceiver answers the first request of each connection and closes
// the connection when the second one arrives, without an answer: a
// receiver whose idle timeout ends as a kept-alive connection is reused.
// It returns its URL and the number of requests it answered.
func closingReceiver(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var answered atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				answered.Add(1)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				// The next request on this connection: read it, then close.
				if req, err := http.ReadRequest(br); err == nil {
					io.Copy(io.Discard, req.Body)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/", &answered
}

// A callback whose kept-alive connection the receiver closes without an
// answer is sent again on a new connection (Idempotency-Key), not failed
// with EOF; a timer's own Idempotency-Key is kept.
func TestHTTPRetriesClosedKeepAlive(t *testing.T) {
	t.Parallel()
	for _, own := range []string{"", "mine"} {
		u, answered := closingReceiver(t)
		r := action.NewHTTPRunner()
		tm := httpTimer("app", u)
		if own != "" {
			tm.Action.HTTP.Header = map[string]string{"idempotency-key": own}
		}
		for i := range 3 {
			run := testRun()
			run.ID = "run_" + strconv.Itoa(i)
			if _, err := r.Run(t.Context(), run, tm); err != nil {
				t.Fatalf("own key %q: callback %d: %v", own, i, err)
			}
		}
		if n := answered.Load(); n != 3 {
			t.Errorf("own key %q: receiver answered %d callbacks, want 3", own, n)
		}
	}
}

// The header carries the run id, or the timer's own value.
func TestHTTPIdempotencyKey(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ own, want string }{{"", "run_1"}, {"k-42", "k-42"}} {
		tm := httpTimer("app", srv.URL)
		if tc.own != "" {
			tm.Action.HTTP.Header = map[string]string{"Idempotency-Key": tc.own}
		}
		if _, err := (&action.HTTPRunner{Client: srv.Client()}).Run(t.Context(), testRun(), tm); err != nil {
			t.Fatal(err)
		}
		if h := <-got; h.Get("Idempotency-Key") != tc.want || len(h.Values("Idempotency-Key")) != 1 {
			t.Errorf("Idempotency-Key = %q, want %q", h.Values("Idempotency-Key"), tc.want)
		}
	}
}

// TestHTTPLane: the callbacks of one scheme and host share a lane,
// whatever their paths and the case of the host.
func TestHTTPLane(t *testing.T) {
	t.Parallel()
	h := &action.HTTPRunner{}
	for _, tc := range []struct{ url, want string }{
		{"http://127.0.0.1:8080/hook?x=1", "http://127.0.0.1:8080"},
		{"https://Example.COM/a/b", "https://example.com"},
		{"https://example.com?x", "https://example.com"},
		{"https://example.com#f", "https://example.com"},
		{"http://example.com", "http://example.com"},
		{"no-scheme/path", ""},
	} {
		tm := &model.Timer{Action: model.Action{Type: model.ActionHTTP, HTTP: &model.HTTPAction{URL: tc.url}}}
		if got, conns := h.Lane(tm); got != tc.want || (got != "" && conns != action.MaxConnsPerHost) {
			t.Errorf("Lane(%q) = %q, %d; want %q, %d", tc.url, got, conns, tc.want, action.MaxConnsPerHost)
		}
	}
	if got, _ := h.Lane(&model.Timer{Action: model.Action{Type: model.ActionShell}}); got != "" {
		t.Errorf("Lane of a shell action = %q, want none", got)
	}
}
